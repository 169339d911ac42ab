"""One read-only memory map of an input file, paged in ahead of the threads that read it.

Used by the HDF5 conversion (``stoker.convert.from_hdf5``): a thread of this object's own brings
each slab asked for into the page cache and the page tables (``posix_fadvise(WILLNEED)``, then
``madvise(MADV_POPULATE_READ)``, Linux >= 5.14; without it the readers take the page faults). A
file mostly not cached at open (``mincore`` over its first GiB) is cold: :meth:`MappedFile.release`
drops the ranges paged in once used, so converting it leaves the page cache as it found it.
"""

from __future__ import annotations

import concurrent.futures as cf
import ctypes
import math
import mmap
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from stoker.sources.hdf5 import KeyInfo

_MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)  # the Linux value; Python names it from 3.13
_PAGE_IN_STEP = 16 * 2**20
_COLD = 0.5  # a file with less than this share of its pages cached at open counts as cold
_COLD_PROBE = 2**30  # bytes at the start of the file whose residency decides
_SAMPLE_WINDOWS, _SAMPLE_PAGES = 16, 64  # a sampled residency check: 16 windows of 64 pages


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        return libc
    except (OSError, AttributeError):  # no mincore / madvise on this platform
        return None


_LIBC = _libc()


class MappedFile:
    """One read-only memory map of a file: dataset views, and byte ranges paged in ahead.

    :meth:`ahead` returns at once, with a future that is done once the range is mapped; a thread
    of its own (started on first use) asks the kernel to read the range and maps it, range
    after range in the order asked, while the caller goes on. :meth:`release` gives a range of
    a cold file back once it has been used.
    """

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        try:
            self._map = mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ)
        except BaseException:
            os.close(self._fd)
            raise
        self._populate = _LIBC is not None or hasattr(self._map, "madvise")
        self._pool: cf.ThreadPoolExecutor | None = None
        self._base = np.frombuffer(self._map, np.uint8).ctypes.data if len(self._map) else 0
        self.cold = self.resident(0, min(len(self._map), _COLD_PROBE), sample=True) < _COLD

    @property
    def map(self) -> mmap.mmap:
        return self._map

    def view(self, info: KeyInfo, rows: int) -> np.ndarray:
        count = rows * math.prod(info.shape)
        return np.frombuffer(self._map, info.dtype, count, int(info.offset or 0)).reshape(rows, *info.shape)

    def ahead(self, offset: int, size: int) -> cf.Future[None]:
        """Have ``size`` bytes from ``offset`` read into the page cache and mapped, in the background."""
        if self._pool is None:
            self._pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="stoker-convert-pagein")
        return self._pool.submit(self._page_in, offset, size)

    def resident(self, offset: int, size: int, sample: bool = False) -> float:
        """Share of the pages of a byte range in the page cache (1.0 where ``mincore`` is unavailable).

        ``sample``: look at :data:`_SAMPLE_WINDOWS` evenly spaced windows of the range, not all
        of it (the conversion's main thread asks before every slab).
        """
        lo = offset - offset % mmap.PAGESIZE
        length = offset + size - lo
        if _LIBC is None or length <= 0 or not self._base:
            return 1.0
        window = _SAMPLE_PAGES * mmap.PAGESIZE
        if not sample or length <= _SAMPLE_WINDOWS * window:
            windows = [(lo, length)]
        else:
            step = (length - window) // (_SAMPLE_WINDOWS - 1)
            windows = [(lo + k * step - (k * step) % mmap.PAGESIZE, window) for k in range(_SAMPLE_WINDOWS)]
        cached = pages = 0
        for start, span in windows:
            vec = ctypes.create_string_buffer(-(-span // mmap.PAGESIZE))
            if _LIBC.mincore(self._base + start, span, vec) != 0:
                return 1.0
            flags = np.frombuffer(vec.raw, np.uint8)
            cached += int(np.count_nonzero(flags & 1))
            pages += len(flags)
        return cached / pages

    def madvise(self, advice: int, start: int, length: int) -> None:
        """``madvise`` on a page-aligned range of the map through ctypes, which releases the GIL
        (``mmap.madvise`` holds it while a cold file is read in); raises OSError as ``mmap.madvise``."""
        if _LIBC is not None and self._base:
            if _LIBC.madvise(self._base + start, length, advice) != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err))
        elif hasattr(self._map, "madvise"):
            self._map.madvise(advice, start, length)

    def release(self, offset: int, size: int) -> None:
        """Done with a range: if the file was cold, unmap the range and drop it from the page cache."""
        if not self.cold:
            return
        lo = offset - offset % mmap.PAGESIZE
        if hasattr(mmap, "MADV_DONTNEED"):
            self.madvise(mmap.MADV_DONTNEED, lo, offset + size - lo)  # a read-only file map: just the page tables
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(self._fd, offset, size, os.POSIX_FADV_DONTNEED)

    def _page_in(self, offset: int, size: int) -> None:
        if hasattr(os, "posix_fadvise"):  # Linux; not macOS
            os.posix_fadvise(self._fd, offset, size, os.POSIX_FADV_WILLNEED)  # the whole range queued for reading
        lo = offset - offset % mmap.PAGESIZE
        for start in range(lo, offset + size, _PAGE_IN_STEP):  # mapped piece by piece as it arrives
            if not self._populate:
                return
            try:
                self.madvise(_MADV_POPULATE_READ, start, min(_PAGE_IN_STEP, offset + size - start))
            except OSError:  # kernel older than 5.14: the writer's page faults map the pages instead
                self._populate = False

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        try:
            self._map.close()
        except BufferError:  # a view is still alive somewhere; the map closes when it goes
            pass
        os.close(self._fd)


def page_cache_share(path: str | os.PathLike[str]) -> float:
    """Share of a file's pages in the page cache (1.0 where ``mincore`` is unavailable)."""
    f = MappedFile(Path(path))
    try:
        return f.resident(0, os.path.getsize(path))
    finally:
        f.close()


def drop_from_page_cache(path: str | os.PathLike[str]) -> None:
    """Write a file back and drop its pages from the page cache (Linux; a no-op elsewhere)."""
    if not hasattr(os, "posix_fadvise"):
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
