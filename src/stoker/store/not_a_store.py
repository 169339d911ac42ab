"""What a path that is not a store holds, said in the error: the usual mistake is to pass the raw
data (an image folder, a text file, an HDF5 file, ``.npy`` arrays) where a store was expected.

:func:`hint` looks at the path's name, or at the names of a folder's entries and of its
sub-folders' (at most :data:`LOOK_AT` names in all; nothing is opened); when one kind makes at
least half of the files, it says how to read that kind of data, or how to convert it once. A folder holding shard files but no manifest is a
store whose writer was interrupted.
"""

from __future__ import annotations

import os
from pathlib import Path

LOOK_AT = 2000  # directory entries read at most, so a huge folder costs milliseconds

_KINDS: dict[str, tuple[str, ...]] = {
    # images: vision/finder.py's IMG_EXTENSIONS (the store layer does not import vision)
    "images": (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"),
    "text": (".txt", ".jsonl", ".csv", ".tsv"),
    "hdf5": (".h5", ".hdf5", ".he5", ".nc"),
    "arrays": (".npy", ".npz"),
}
_HOW = {  # {folder}: the image folder; {file}: one file of the kind
    "images": "image files: read them with stoker.vision.ImageSource({folder!r}, transforms), or write a store "
    "once with `stoker convert images {folder} STORE`",
    "text": "text ({file}): read it with stoker.text.Loader({file!r}, ...), or tokenize it once with "
    "`stoker convert text {file} STORE`",
    "hdf5": "HDF5 ({file}): read it with stoker.sources.HDF5({file!r}), or write a store once with "
    "`stoker convert hdf5 {file} STORE`",
    "arrays": "numpy arrays ({file}): read them with stoker.sources.Arrays(...), or write a store once with "
    "`stoker convert arrays NAME={file} STORE`",
}


def kind_of_name(name: str) -> str | None:
    lower = name.lower()
    return next((kind for kind, ends in _KINDS.items() if lower.endswith(ends)), None)


def hint(path: Path) -> str:
    """A sentence on what ``path`` holds and how to read it, or "" when nothing is recognised."""
    if path.is_file():
        kind = kind_of_name(path.name)
        if kind is None:
            return ""
        how = _HOW[kind].replace(" ({file})", "")  # the message names the file already
        return f"it is {how.format(folder=str(path.parent), file=str(path))}"
    counts: dict[str, int] = {}
    example: dict[str, str] = {}
    files = shards = 0
    seen = 0
    folders = [path]
    for depth in range(2):
        below = []
        for folder in folders:
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        seen += 1
                        if seen > LOOK_AT:
                            break
                        if entry.is_dir(follow_symlinks=False):
                            below.append(Path(entry.path))
                            continue
                        files += 1
                        if depth == 0 and entry.name.startswith("shard-") and entry.name.endswith(".arrow"):
                            shards += 1
                        elif kind := kind_of_name(entry.name):
                            counts[kind] = counts.get(kind, 0) + 1
                            example.setdefault(kind, entry.path)
            except OSError:
                continue
        folders = below
    if shards:
        return f"it holds {shards} shard file(s) but no manifest: its writer was interrupted before finishing (write it again)"
    kind = max(counts, key=lambda k: counts[k], default=None)
    if kind is None or 2 * counts[kind] < files:  # a mixed folder: no guess
        return ""
    return f"it holds {_HOW[kind].format(folder=str(path), file=example[kind])}"


__all__ = ["hint", "kind_of_name"]
