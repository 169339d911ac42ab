"""The cache's directories and files, safe on a machine shared with other users.

- The cache root (``cache_dir``; by default per user: ``STOKER_CACHE_DIR``, else
  ``$XDG_CACHE_HOME/stoker``, else ``~/.cache/stoker``) is made with mode 0700; an existing one
  must belong to this user and be writable by no one else. A store's directory in it
  (``<root>/<key>``) is made and checked the same way, and must not be a symbolic link. Anything
  else is a StoreError naming the directory and saying what to do: no other user can then plant
  a file or a link where stoker writes.
- Every file stoker writes there is created with ``O_CREAT|O_EXCL|O_NOFOLLOW`` under a name
  nobody can guess (``<name>.part-<pid>-<random>``, :func:`new_part`), then renamed into place
  (a rename replaces a link, it never writes through one); lock files are opened with
  ``O_NOFOLLOW`` (:func:`open_lock`). A link under one of those names is a StoreError naming it.
- Those names carry the writer's pid (:func:`writer_pid`): what a dead process left behind is
  swept when a store's cache is opened (``cache.py``).
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from pathlib import Path

from stoker.errors import StoreError, StoreWriteError
from stoker.settings import env as settings_env

CACHE_DIR_ENV = "STOKER_CACHE_DIR"
_PART = re.compile(r"(?P<key>.+\.part-(?P<pid>\d+))(-[0-9a-f]+)?")  # "<name>.part-<pid>[-<random>]"


def default_root() -> Path:
    """``STOKER_CACHE_DIR``, else ``$XDG_CACHE_HOME/stoker``, else ``~/.cache/stoker`` (read now)."""
    env = settings_env(CACHE_DIR_ENV)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "stoker"


def store_directory(root: str | os.PathLike[str] | None, key: str) -> Path:
    """``<root>/<key>`` (root: :func:`default_root` when None), both made with mode 0700 or checked (see above)."""
    base = Path(root) if root is not None else default_root()
    _make(base, parents=True)
    _check(base, "cache_dir")
    directory = base / key
    _make(directory)
    _check(directory, "the store's cache directory")
    return directory


def _make(path: Path, parents: bool = False) -> None:
    try:
        path.mkdir(mode=0o700, parents=parents)  # parents the user's umask makes; the directory itself 0700
    except FileExistsError:
        pass
    except OSError as exc:
        raise StoreWriteError.from_os_error(exc, path) from exc


def _check(path: Path, what: str) -> None:
    """``path`` is a directory of this user that no one else may write to (a link: only the root, and only the user's)."""
    me = os.geteuid()
    try:
        link = os.lstat(path)
        st = os.stat(path) if stat.S_ISLNK(link.st_mode) and what == "cache_dir" else link
    except OSError as exc:
        raise StoreWriteError.from_os_error(exc, path) from exc
    own = f"use a directory of your own (cache_dir=, or {CACHE_DIR_ENV}; the default ~/.cache/stoker is per user)"
    if stat.S_ISLNK(st.st_mode) or link.st_uid != me and stat.S_ISLNK(link.st_mode):
        raise StoreError(
            f"{what} {path} is a symbolic link (to {os.readlink(path)}) that stoker did not make: its cache never "
            f"follows one; remove it, and check who else can write to {path.parent}",
            path=path,
        )
    if not stat.S_ISDIR(st.st_mode):
        raise StoreError(f"{what} {path} is not a directory; remove it or {own}", path=path)
    if st.st_uid != me:
        raise StoreError(
            f"{what} {path} belongs to another user (uid {st.st_uid}), who could plant files and links in it; {own}",
            path=path,
        )
    if st.st_mode & 0o022:
        raise StoreError(
            f"{what} {path} is writable by other users (mode {stat.S_IMODE(st.st_mode):o}), who could plant files "
            f"and links in it: run chmod 700 {path}, or {own}",
            path=path,
        )


def new_part(directory: Path, name: str, data: bytes = b"") -> Path:
    """A new file ``<name>.part-<pid>-<random>`` in ``directory`` holding ``data`` (mode 0600), never made through a link."""
    path = directory / f"{name}.part-{os.getpid()}-{secrets.token_hex(6)}"
    fd = _open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        raise StoreWriteError.from_os_error(exc, path) from exc
    finally:
        os.close(fd)
    return path


def open_lock(path: Path) -> int:
    """A descriptor of lock file ``path``, made if missing; a link there is a StoreError naming it."""
    return _open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC)


def _open(path: Path, flags: int) -> int:
    try:
        return os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StoreError(
                f"{path} is a symbolic link: stoker never writes through a link in its cache; remove it, and check "
                f"who else can write to {path.parent}",
                path=path,
            ) from None
        raise StoreWriteError.from_os_error(exc, path) from exc


def writer_pid(name: str) -> tuple[str, int] | None:
    """``(key, pid)`` of a file named by :func:`new_part` (``key``: ``<name>.part-<pid>``), else None."""
    m = _PART.fullmatch(name)
    return None if m is None else (m.group("key"), int(m.group("pid")))


__all__ = ["CACHE_DIR_ENV", "default_root", "new_part", "open_lock", "store_directory", "writer_pid"]
