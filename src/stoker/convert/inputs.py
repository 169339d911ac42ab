"""A conversion's input read from an object store: the text files or images under an ``s3://`` prefix.

``stoker.convert.text("s3://bucket/corpus/*.txt", ...)`` and ``stoker.convert.images("s3://bucket/photos/",
...)`` (and their Ray forms) list the objects through the remote seam (``stoker.remote.objects``: the
fetcher of the scheme, obstore by default, fsspec the fallback) and read them by byte ranges; no other
client is made. A missing bucket, refused credentials or a prefix with no objects is a short StokerError
(the client's error behind ``__cause__``).

Text: :class:`TextFiles` is the input as files read by ranges: one local file, or the objects a URL
names, in name order, read as one file would be (the header line of a CSV/TSV object after the first
left out: they must all be the same; a newline put after an object that ends without one).
:func:`joined` writes them as one local file for the single-machine converter; a Ray conversion cuts
them into partitions instead (``partitions.plan_text``) and each task reads its own range.

Images: :func:`fetched_images` downloads the objects under the prefix into a local folder of the
same layout (class folders, a ``labels.csv``), which the single-machine converter reads as it reads a
local folder; :func:`image_skeleton` makes that folder with empty files in place of the images (the
labels files fetched), for a Ray driver that only needs the layout: each task downloads its own
images (``ray_tasks.py``). The store's ``root`` metadata is the URL.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from stoker.convert.options import ConvertOptions
from stoker.errors import ConfigError, InputError
from stoker.remote.objects import Objects, list_objects, split_pattern
from stoker.store.urls import is_remote
from stoker.text.inputs import FORMATS
from stoker.vision.finder import LABEL_FILES

CHUNK = 8 * 2**20  # bytes read at a time
Read = Callable[[int, int, int], bytes]  # (file, start, stop) -> bytes


@contextmanager
def staged(src: Any, store: Any, options: ConvertOptions, images: bool) -> Iterator[tuple[Path, ConvertOptions]]:
    """``src`` (a URL) as a local file or folder in a temporary directory (beside a local store), and the options
    of the store's writer (``storage_options`` kept only for a URL store: for a local one they were the input's)."""
    near = None if is_remote(store) else Path(store).resolve().parent
    with tempfile.TemporaryDirectory(prefix=".stoker-input-", dir=near if near and near.is_dir() else None) as tmp:
        if images:
            local = fetched_images(image_objects(src, options.storage_options), Path(tmp))
            options = replace(options, metadata={"root": os.fspath(src), **(options.metadata or {})})
        else:
            files = TextFiles.of(src, options.storage_options)
            local = joined(files, Path(tmp) / f"input{files.suffix}")
        yield local, replace(options, storage_options=source_options(src, store, options.storage_options))


def is_url(src: Any) -> bool:
    """Whether ``src`` is an object-store URL (not a local path, a list or an object)."""
    return isinstance(src, (str, os.PathLike)) and is_remote(src)


def source_options(src: Any, store: Any, storage_options: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The ``storage_options`` of the store's writer: none for a local store read from a URL (they were the input's)."""
    return None if is_url(src) and not is_remote(store) else storage_options


@dataclass(frozen=True)
class TextFiles:
    """The text input as files read by byte ranges: ``names`` (local paths, or object names under
    ``objects.root``), their ``sizes``, and the format of all (``lines``, ``jsonl``, ``csv``, ``tsv``)."""

    src: str
    names: tuple[str, ...]
    sizes: tuple[int, ...]
    fmt: str
    suffix: str
    objects: Objects | None = None

    @classmethod
    def of(cls, src: Any, storage_options: Mapping[str, Any] | None = None) -> TextFiles:
        """The files of ``src`` (a local file or a URL); InputError for a missing file or an unknown format."""
        if not is_url(src):
            path = Path(src)
            if not path.is_file():
                raise InputError(
                    f"{path} does not exist or is not a file; pass a .txt, .jsonl, .csv or .tsv file", path=path
                )
            return cls(str(path), (str(path),), (path.stat().st_size,), _format(path.name, str(path)), path.suffix)
        objects = list_objects(os.fspath(src), storage_options)
        suffixes = {PurePosixPath(n).suffix.lower() for n in objects.names}
        if len(suffixes) > 1:
            raise InputError(
                f"{src}: the objects have different suffixes ({', '.join(sorted(suffixes))}); give a pattern that "
                "selects one format (s3://bucket/prefix/*.txt)"
            )
        fmt = _format(objects.names[0], os.fspath(src))
        return cls(os.fspath(src), objects.names, objects.sizes, fmt, PurePosixPath(objects.names[0]).suffix, objects)

    @property
    def header(self) -> bool:
        """Whether each file begins with a header line (CSV/TSV)."""
        return self.fmt in ("csv", "tsv")

    def where(self, i: int) -> str:
        """File ``i`` in messages: its path or URL."""
        return self.names[i] if self.objects is None else f"{self.objects.root}/{self.names[i]}"

    def reader(self) -> Read:
        """A ``read(file, start, stop)`` of these files (for a URL, through one fetcher made here)."""
        if self.objects is None:
            return _read_local(self.names)
        where, objects = self.objects.remote(), self.objects
        return lambda i, start, stop: objects.read(where, i, start, stop)

    def chunks(self, read: Read, i: int, start: int, stop: int) -> Iterator[bytes]:
        """Bytes ``start:stop`` of file ``i`` in pieces of at most :data:`CHUNK`; InputError if it is shorter."""
        while start < stop:
            piece = read(i, start, min(start + CHUNK, stop))
            if not piece:
                raise InputError(f"{self.where(i)} became shorter while it was converted; convert it again")
            start += len(piece)
            yield piece

    def first_line(self, read: Read, i: int) -> bytes:
        """The first line of file ``i`` with its newline (the header of a CSV/TSV file)."""
        line, start = b"", 0
        while start < self.sizes[i]:
            piece = read(i, start, start + 65536)
            end = piece.find(b"\n")
            if end >= 0:
                return line + piece[: end + 1]
            line, start = line + piece, start + len(piece)
        return line

    def headers(self, read: Read) -> list[int]:
        """Each file's header length in bytes (0 without headers); InputError when a header differs from the first."""
        if not self.header:
            return [0] * len(self.names)
        first = self.first_line(read, 0)
        lengths = [len(first)]
        for i in range(1, len(self.names)):
            line = self.first_line(read, i)
            if line.rstrip(b"\r\n") != first.rstrip(b"\r\n"):
                raise InputError(
                    f"{self.where(i)}: its header line {line[:80]!r} is not the first object's {first[:80]!r}; "
                    "the objects of one conversion must have the same columns"
                )
            lengths.append(len(line))
        return lengths


def joined(files: TextFiles, out: Path) -> Path:
    """The files written as the one local file ``out`` (see the module docstring), for the single-machine converter."""
    read = files.reader()
    headers = files.headers(read)
    with open(out, "wb") as w:
        for i, size in enumerate(files.sizes):
            last = b"\n"
            for piece in files.chunks(read, i, headers[i] if i else 0, size):
                w.write(piece)
                last = piece[-1:]
            if last != b"\n":
                w.write(b"\n")
    return out


def _format(name: str, src: str) -> str:
    fmt = FORMATS.get(PurePosixPath(name).suffix.lower())
    if fmt is None:
        raise InputError(
            f"{src}: unknown text format {PurePosixPath(name).suffix!r}; stoker reads {', '.join(sorted(FORMATS))}"
        )
    return fmt


def _read_local(paths: tuple[str, ...]) -> Read:
    def read(i: int, start: int, stop: int) -> bytes:
        with open(paths[i], "rb") as f:
            f.seek(start)
            return f.read(stop - start)

    return read


def image_objects(src: Any, storage_options: Mapping[str, Any] | None) -> Objects:
    """The objects under the image prefix ``src`` (a folder of them: the URL ends as a prefix, not a pattern)."""
    if split_pattern(os.fspath(src))[1] is not None:
        raise ConfigError(f"{src}: give images as a prefix (s3://bucket/photos/), not a pattern", option="src")
    return list_objects(os.fspath(src), storage_options)


def fetched_images(objects: Objects, directory: Path) -> Path:
    """Every object under the prefix downloaded into ``directory`` (the same layout); the folder to convert."""
    where = objects.remote()
    for i in range(len(objects.names)):
        objects.download(where, i, directory)
    return directory


def image_skeleton(objects: Objects, directory: Path) -> Path:
    """The prefix's layout in ``directory``: its labels files downloaded, an empty file for every other object."""
    where = objects.remote()
    for i, name in enumerate(objects.names):
        if name in LABEL_FILES:
            objects.download(where, i, directory)
        else:
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            (directory / name).touch()
    return directory


__all__ = [
    "TextFiles",
    "fetched_images",
    "image_objects",
    "image_skeleton",
    "is_url",
    "joined",
    "source_options",
    "staged",
]
