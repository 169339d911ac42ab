"""What an HDF5 file may make stoker read: files other than the one named, and the sizes it declares.

Checked at open by ``hdf5_describe.describe`` (for ``sources.HDF5`` and ``convert.hdf5``), before a
row is read or written.

**Other files.** A dataset reached through an external link (on it or on a group above it, soft
links followed), stored in external files (``external=``), or virtual (a VDS reads its source files,
checked in turn) makes HDF5 read files the user never named. Each is refused with a ConfigError
naming the dataset and the file unless ``allow_external`` names a directory holding it (real paths);
an external link is checked before HDF5 follows it. A relative name is looked up wherever HDF5 may
look (the working directory, the naming file's directory, ``HDF5_EXT_PREFIX``, ``HDF5_EXTFILE_PREFIX``,
``HDF5_VDS_PREFIX``): every candidate that exists must be allowed, and one must exist. What h5py would
read silently as fill values or zeros is refused too: a VDS source missing or smaller than what is
mapped from it, an external file shorter than the bytes read from it. Such datasets are read through
h5py; ``HDF5.files`` and a conversion's ``report["source"]["files"]`` list every file read.

**Declared sizes.** Rows never written read as the fill value: a dataset whose never-written part
(its declared bytes less those of its stored chunks, contiguous block or mapped VDS regions) is over
:data:`FILL_LIMIT` is refused unless ``allow_fill=True``, so an 11 KB file cannot make a conversion
write terabytes of fill.
"""

from __future__ import annotations

import math
import os
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stoker.errors import ConfigError, InputError
from stoker.store.sizes import size_text

FILL_LIMIT = 64 * 2**20  # never-written bytes a dataset may read as its fill value without allow_fill=True
_PREFIXES = ("HDF5_EXT_PREFIX", "HDF5_EXTFILE_PREFIX", "HDF5_VDS_PREFIX")  # where HDF5 also looks
_DEPTH = 4  # virtual datasets whose sources are virtual, checked this deep

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class Bounds:
    """What an HDF5 file may make stoker read beyond it: ``allow`` (real paths of allowed directories) and fill."""

    path: Path
    allow: tuple[Path, ...] = ()
    fill: bool = False

    @classmethod
    def of(cls, path: Path, allow_external: PathLike | Sequence[PathLike] | None, allow_fill: bool) -> Bounds:
        """Bounds of the file ``path`` from the user's options, checked."""
        if not isinstance(allow_fill, bool):
            raise ConfigError(f"allow_fill must be True or False, not {allow_fill!r}", option="allow_fill")
        dirs = [allow_external] if isinstance(allow_external, (str, os.PathLike)) else list(allow_external or ())
        allow = []
        for d in dirs:
            if not isinstance(d, (str, os.PathLike)) or not os.path.isdir(d):
                raise ConfigError(
                    f"allow_external must name existing directories; {d!r} is not one", option="allow_external"
                )
            allow.append(Path(os.path.realpath(d)))
        return cls(path, tuple(allow), allow_fill)

    def foreign(self, where: str, what: str, name: str, base: str) -> str:
        """The real path of the file ``name`` (``what``: how ``where`` reaches it; relative to ``base`` or the
        working directory), checked to be allowed: a ConfigError when it is not, an InputError when it is nowhere."""
        found = [os.path.realpath(p) for p in _candidates(name, base) if os.path.isfile(p)]
        outside = [p for p in found if not any(Path(p).is_relative_to(d) for d in self.allow)]
        if not found:
            raise InputError(
                f"{where} reads the file {name!r} ({what}), which does not exist: HDF5 would read fill values or "
                "fail. Put the file where the HDF5 file says it is",
                path=self.path,
            )
        if outside:
            allowed = [str(d) for d in self.allow] or "none"
            raise ConfigError(
                f"{where} reads the file {outside[0]} ({what}), not only {self.path}; stoker reads other files only "
                f"from directories you allow (allowed: {allowed}). If you trust it, pass "
                f"allow_external='{os.path.dirname(outside[0])}'",
                option="allow_external",
            )
        return found[0]

    def links(self, f: Any, key: str, path: str | None = None, depth: int = 0) -> None:
        """Check the external links on the way to ``key`` in the open file ``f`` before HDF5 follows them
        (soft links followed here, ``depth`` deep, so that no link HDF5 follows goes unchecked)."""
        import h5py

        parts = (key if path is None else path).strip("/").split("/")
        for i in range(1, len(parts) + 1):
            at = "/" + "/".join(parts[:i])
            try:
                link = f.get(at, getlink=True)
            except (KeyError, OSError, ValueError):  # a part that does not resolve: describe says so
                return
            if isinstance(link, h5py.ExternalLink):
                where = f"{f.filename}: key {key!r}"
                self.foreign(where, f"the target of the external link {at.lstrip('/')!r}", link.filename, f.filename)
                return
            if isinstance(link, h5py.SoftLink) and depth < _DEPTH:
                target = posixpath.normpath(posixpath.join(posixpath.dirname(at), link.path))
                self.links(f, key, posixpath.join(target, *parts[i:]), depth + 1)
                return

    def dataset(self, ds: Any, where: str, named: str, depth: int = 0) -> tuple[str, ...]:
        """The files other than ``named`` that reading ``ds`` reads, each checked; its declared size checked."""
        import h5py

        files = []
        here = ds.file.filename
        if os.path.realpath(here) != os.path.realpath(named):  # reached through a link, however indirect
            files.append(self.foreign(where, "the file of the linked dataset", here, named))
        left = ds.id.get_type().get_size() * math.prod(ds.shape)  # bytes still to find in the external files
        for name, offset, size in ds.external or ():
            files.append(self.foreign(where, "its external storage", _decode(name), here))
            take, left = min(size, left), left - min(size, left)
            if os.path.getsize(files[-1]) < offset + take:
                raise InputError(
                    f"{where} reads {take} bytes from byte {offset} of {files[-1]}, which holds "
                    f"{os.path.getsize(files[-1])}: HDF5 would read zeros past its end",
                    path=self.path,
                )
        if ds.is_virtual:
            for source in ds.virtual_sources():
                name = source.file_name
                if depth >= _DEPTH:
                    raise ConfigError(f"{where} is a virtual dataset nested over {_DEPTH} deep", option="keys")
                if name == ".":
                    files += self._source(ds.file, source, where, named, depth)
                    continue
                real = self.foreign(where, "a source of the virtual dataset", name, here)
                files.append(real)
                with h5py.File(real, "r") as g:
                    files += self._source(g, source, where, named, depth)
        self._sizes(ds, where)
        return tuple(dict.fromkeys(files))

    def _source(self, f: Any, source: Any, where: str, named: str, depth: int) -> list[str]:
        """The files read by ``source`` (a mapping of a virtual dataset) in its file ``f``; what it maps checked."""
        import h5py

        key = source.dset_name
        self.links(f, key)
        obj = f.get(key)
        if not isinstance(obj, h5py.Dataset):
            raise InputError(
                f"{where}: its source dataset {key!r} is not in {f.filename} (HDF5 would read fill values)",
                path=self.path,
            )
        space, count = source.src_space, source.vspace.get_select_npoints()
        if space.get_select_type() == h5py.h5s.SEL_ALL:  # the whole source, whatever its shape: as many values?
            beyond = math.prod(obj.shape) < count
        else:
            beyond = any(int(e) >= n for e, n in zip(space.get_select_bounds()[1], obj.shape))
        if beyond:
            raise InputError(
                f"{where} maps {count} values from source {key!r} in {f.filename} (shape {obj.shape}), some "
                "beyond its end: HDF5 would read the fill value there",
                path=self.path,
            )
        return list(self.dataset(obj, f"{where} (source {key!r} in {f.filename})", named, depth + 1))

    def _sizes(self, ds: Any, where: str) -> None:
        """An InputError when ``ds`` declares far more rows than were written (without ``allow_fill``)."""
        item = ds.id.get_type().get_size()
        declared = item * math.prod(ds.shape)
        if ds.external:
            return  # checked in dataset(): the files hold every byte
        if ds.is_virtual:
            stored = item * sum(s.vspace.get_select_npoints() for s in ds.virtual_sources())
        elif ds.chunks:
            stored = item * math.prod(ds.chunks) * ds.id.get_num_chunks()
        else:  # contiguous: HDF5 itself refuses a file shorter than its header says at open
            stored = ds.id.get_storage_size()
        unwritten = declared - min(declared, stored)
        if unwritten > FILL_LIMIT and not self.fill:
            raise InputError(
                f"{where} declares {size_text(declared)} (shape {tuple(ds.shape)}), of which {size_text(unwritten)} "
                f"were never written and would read as its fill value; the file holds "
                f"{size_text(os.path.getsize(ds.file.filename))}. If those fill rows are wanted, pass allow_fill=True",
                path=self.path,
            )


def _candidates(name: str, base: str) -> list[str]:
    """Where HDF5 may find a file named ``name`` by a file at ``base``: as is (working directory), by ``base``,
    under the prefixes HDF5 takes from the environment (``${ORIGIN}``: ``base``'s directory)."""
    if os.path.isabs(name):
        return [name]
    origin = os.path.dirname(os.path.abspath(base))
    prefixes = [p for var in _PREFIXES for p in os.environ.get(var, "").split(os.pathsep) if p]
    dirs = [os.getcwd(), origin, *(p.replace("${ORIGIN}", origin) for p in prefixes)]
    return list(dict.fromkeys(os.path.join(d, name) for d in dirs))


def _decode(name: str | bytes) -> str:
    return name.decode("utf-8", "surrogateescape") if isinstance(name, bytes) else name
