"""Putting a finished store in place: an atomic swap, hidden temporaries, recovery after a kill.

A writer works in a hidden directory beside its destination ``DEST`` and moves it into place
at the end. The hidden names carry the writer's pid, so that a later writer can tell the
leftovers of a killed one from the work of a live one:

- ``.DEST.tmp-PID-HEX``: a writer's working directory (complete once it holds manifest.json);
- ``.DEST.old-PID-HEX``: a replaced store being deleted (two-step swap only).

``overwrite=True`` swaps the new store and the old one with ``renameat2(RENAME_EXCHANGE)``
(Linux >= 3.15, glibc >= 2.28; called through ctypes): ``DEST`` always names a complete store.
Where the call or the filesystem lacks it, the swap is two renames (``DEST`` -> ``.old``, then
``.tmp`` -> ``DEST``); a writer killed between them leaves no ``DEST``, and :func:`recover`
(called when a store is opened or written and ``DEST`` is missing) moves the newest complete
hidden store of a dead writer back into place. :func:`sweep` deletes the hidden directories
of dead writers; every new write of ``DEST`` calls it.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

from stoker.errors import StoreExistsError, StoreWriteError

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_HIDDEN = re.compile(r"\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<pid>\d+)-[0-9a-f]{12}")
_MANIFEST = "manifest.json"


def hidden_dir(dest: Path, kind: str) -> Path:
    """A new hidden name beside ``dest`` for this process: ``.DEST.KIND-PID-HEX`` (``kind``: tmp or old)."""
    return dest.parent / f".{dest.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (this one does; another user's counts as running: not ours to judge)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _leftovers(dest: Path) -> list[tuple[str, Path]]:
    """Hidden directories of ``dest`` whose writer has exited: ``(kind, path)``."""
    try:
        entries = list(os.scandir(dest.parent))
    except OSError:
        return []
    out = []
    for entry in entries:
        m = _HIDDEN.fullmatch(entry.name)
        if m and m.group("name") == dest.name and not pid_alive(int(m.group("pid"))):
            out.append((m.group("kind"), Path(entry.path)))
    return out


def recover(dest: Path) -> bool:
    """Move a killed writer's complete store back to ``dest`` when ``dest`` is missing; True if one was.

    The newest complete new store (``.tmp``) is preferred to the one it was replacing (``.old``).
    """
    if os.path.lexists(dest):
        return False
    complete = [(kind, p) for kind, p in _leftovers(dest) if (p / _MANIFEST).is_file()]
    complete.sort(key=lambda kp: (kp[0] == "tmp", (kp[1] / _MANIFEST).stat().st_mtime), reverse=True)
    for _, path in complete:
        try:
            os.rename(path, dest)
            return True
        except OSError:  # another process recovered it first, or it went away meanwhile
            if os.path.lexists(dest):
                return False
    return False


def sweep(dest: Path) -> None:
    """Delete the hidden directories that killed writers left beside ``dest``."""
    for _, path in _leftovers(dest):
        remove_tree(path)


def remove_tree(path: Path) -> None:
    """Delete a store directory, its manifest first (a half-deleted store is never complete)."""
    try:
        (path / _MANIFEST).unlink(missing_ok=True)
    except OSError:
        pass
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        path.unlink()


@functools.lru_cache(maxsize=1)
def _renameat2() -> Any:
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def exchange(a: Path, b: Path) -> bool:
    """Swap the paths ``a`` and ``b`` atomically; False where libc, the kernel or the filesystem cannot."""
    fn = _renameat2()
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def replace_dir(tmp: Path, dest: Path, overwrite: bool) -> None:
    """Move the complete store ``tmp`` to ``dest``, swapping out an existing one when ``overwrite``."""
    if not os.path.lexists(dest):
        os.rename(tmp, dest)
        return
    if not overwrite:
        raise StoreExistsError(f"{dest} appeared while writing; pass overwrite=True to replace it", path=dest)
    if exchange(tmp, dest):  # tmp now holds the old store, under this writer's pid
        remove_tree(tmp)
        return
    old = hidden_dir(dest, "old")
    os.rename(dest, old)
    os.rename(tmp, dest)
    remove_tree(old)


def check_writable(path: Path) -> None:
    """Raise StoreWriteError, naming ``path``, when a store cannot be made there; leaves nothing behind.

    Every existing ancestor of ``path`` must be a directory, and the nearest one must take a new
    directory (a probe made and removed at once): a file standing in the way, a missing or
    read-only file system (``/proc``, a read-only mount) or no permission.
    """
    ancestor = path.absolute().parent
    while not ancestor.exists():
        if ancestor.is_symlink():  # a dangling link: mkdir cannot go through it
            break
        ancestor = ancestor.parent
    if ancestor.exists() and not ancestor.is_dir():
        raise StoreWriteError(
            f"cannot write the store {path}: {ancestor} is a file, not a directory; choose another path for the store",
            path=path,
        )
    try:
        probe = hidden_dir(ancestor / path.name, "tmp")  # pid-named: swept if this process is killed here
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        raise unwritable(path, exc, ancestor) from None


def unwritable(path: Path, exc: OSError, where: Path | None = None) -> StoreWriteError:
    """The error of a store ``path`` whose directory (or its parent ``where``) cannot be made."""
    place = f" in {where}" if where is not None and where != path.parent else ""
    return StoreWriteError(
        f"cannot write the store {path}: cannot make a directory{place} ({exc.strerror or exc}); "
        "choose a path on a writable file system where you may create directories",
        path=path,
        errno=exc.errno,
    )


__all__ = [
    "hidden_dir",
    "recover",
    "sweep",
    "remove_tree",
    "exchange",
    "replace_dir",
    "check_writable",
    "unwritable",
    "pid_alive",
]
