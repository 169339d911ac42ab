"""Files in POSIX shared memory (``/dev/shm``) for the process engine: made with their space
reserved, mapped as uint8 arrays, unlinked, and swept when their consumer is gone.

Names start with ``stoker_<consumer pid>_``, so :func:`sweep_stale_segments` can remove what a
killed consumer left. Space is reserved when a file is made (``posix_fallocate``), so a full
``/dev/shm`` is an error naming it, not a SIGBUS in a worker writing into a sparse file.
"""

from __future__ import annotations

import errno
import glob
import mmap
import os
import shutil

import numpy as np

from stoker.errors import WorkerError

SHM = "/dev/shm"


def pages(n: int) -> int:
    """``n`` bytes rounded up to whole pages (at least one)."""
    return max(mmap.PAGESIZE, -(-n // mmap.PAGESIZE) * mmap.PAGESIZE)


def shm_free() -> int:
    """Free bytes in ``/dev/shm`` (0 where there is none)."""
    return shutil.disk_usage(SHM).free if os.path.isdir(SHM) else 0


def map_segment(name: str, size: int, create: bool) -> np.ndarray:
    """The bytes of ``/dev/shm/<name>`` as a writable uint8 array (made and reserved if ``create``).

    The array keeps the mapping alive: views of it stay valid after the name is unlinked.
    """
    path = os.path.join(SHM, name)
    fd = os.open(path, os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0), 0o600)
    try:
        if create:
            try:
                os.posix_fallocate(fd, 0, size)
            except OSError as exc:
                os.unlink(path)
                raise WorkerError(
                    f"cannot reserve {size / 2**20:.1f} MiB in {SHM} for a batch of the worker processes "
                    f"({os.strerror(exc.errno or errno.ENOSPC)}; {shm_free() / 2**20:.0f} MiB free there): use "
                    "fewer workers, a smaller prefetch_factor or batch_size, engine='threads', or a bigger "
                    "/dev/shm (docker run --shm-size=8g)"
                ) from exc
        return np.frombuffer(mmap.mmap(fd, size), np.uint8)
    finally:
        os.close(fd)


def unlink_segment(name: str) -> None:
    """Remove ``/dev/shm/<name>`` if it is there (its memory lives on while mapped)."""
    try:
        os.unlink(os.path.join(SHM, name))
    except FileNotFoundError:
        pass


def unlink_all(token: str) -> None:
    """Remove every file of the pool named by ``token``.

    The names are matched by prefix, not by ``glob``: a glob pattern per pool (a new one each epoch
    where workers start each epoch) would stay in ``fnmatch``'s cache of compiled patterns, up to
    32,768 of them, a slow growth of a long run's memory."""
    prefix = f"stoker_{token}_"
    try:
        names = os.listdir(SHM)
    except OSError:
        return
    for name in names:
        if name.startswith(prefix):
            try:
                os.unlink(os.path.join(SHM, name))
            except OSError:
                pass


def sweep_stale_segments(directory: str = SHM) -> int:
    """Unlink stoker segments whose consumer process is gone (it was killed before cleaning up).

    Segment names start with the consumer's pid (``stoker_<pid>_...``). Returns how many went.
    """
    removed = 0
    for path in glob.glob(os.path.join(directory, "stoker_*")):
        parts = os.path.basename(path).split("_")
        if len(parts) < 3 or not parts[1].isdigit():
            continue
        try:
            os.kill(int(parts[1]), 0)
            continue  # alive (or not ours to judge)
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        try:
            os.unlink(path)
            removed += 1
        except FileNotFoundError:
            pass
    return removed


__all__ = ["SHM", "map_segment", "pages", "shm_free", "sweep_stale_segments", "unlink_all", "unlink_segment"]
