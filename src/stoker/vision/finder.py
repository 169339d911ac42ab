"""Where images come from: lists of files with labels, found in the layouts users have.

* a class-per-folder tree (torchvision's ImageFolder layout: classes are the sorted
  sub-folder names, ``class_to_idx`` maps them to 0..n-1, files sorted within a class);
* a flat folder with a CSV (``file,label`` rows, header optional) or JSON
  (``{"file": label}`` or ``[{"file": ..., "label": ...}]``) labels file;
* a list of paths, with or without labels;
* a torchvision-style dataset object with ``samples`` (and ``classes``/``class_to_idx``).

Given a label map (``names``: the class names in id order, e.g. the training split's; taken as
``label_names=``/``class_to_idx=`` by ``stoker.convert.images`` and ``ImageSource``), every layout
numbers its labels by it: a class outside it is an error naming it. Without one, a split whose
sorted class folders number a class otherwise than a sibling folder does (``data/val`` lacking a
class of ``data/train``) is warned of (:class:`SplitClassesWarning`).

Files are found by extension (``IMG_EXTENSIONS``, as torchvision); others are listed in
``ImageList.ignored``. A file with an image extension that is not an image is reported when read.
"""

from __future__ import annotations

import csv
import json
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stoker.errors import ConfigError, EmptyDatasetError, InputError

SIBLINGS_SCANNED = 64  # a parent holding more folders than this is not a folder of splits: not compared
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
LABEL_FILES = ("labels.csv", "labels.json")


class SplitClassesWarning(UserWarning):
    """An ImageFolder numbers a class otherwise than a sibling folder of the same layout (another split)."""


@dataclass(frozen=True)
class ImageList:
    """Image files, their integer labels (or None) and the class names (or None).

    Attributes:
        paths: absolute or root-relative file paths, in dataset order.
        labels: one integer per path, or None for unlabeled images.
        classes: class names, ``classes[label]``; None when labels are plain integers.
        root: the folder the paths were found in (relative names in reports are under it).
        ignored: files found that do not have an image extension.
    """

    paths: tuple[str, ...]
    labels: tuple[int, ...] | None = None
    classes: tuple[str, ...] | None = None
    root: str | None = None
    ignored: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "paths", tuple(str(p) for p in self.paths))
        if self.labels is not None:
            labels = tuple(int(x) for x in self.labels)
            if len(labels) != len(self.paths):
                raise ConfigError(
                    f"{len(self.paths)} paths but {len(labels)} labels; give one label per image", option="labels"
                )
            if self.classes is not None and labels and not 0 <= min(labels) <= max(labels) < len(self.classes):
                raise ConfigError(
                    f"labels range {min(labels)}..{max(labels)} but there are {len(self.classes)} classes",
                    option="labels",
                )
            object.__setattr__(self, "labels", labels)
        if self.classes is not None:
            object.__setattr__(self, "classes", tuple(str(c) for c in self.classes))

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def class_to_idx(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.classes or ())}

    def name(self, i: int) -> str:
        """Row ``i``'s file, relative to the root when it is under it (for reports)."""
        p = self.paths[i]
        if self.root is not None:
            try:
                return str(Path(p).relative_to(self.root))
            except ValueError:
                return p
        return p

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {}
        if self.classes is not None:
            meta["classes"] = list(self.classes)
            meta["class_to_idx"] = self.class_to_idx
        if self.root is not None:
            meta["root"] = self.root
        return meta


def _is_image(name: str) -> bool:
    return name.lower().endswith(IMG_EXTENSIONS)


def _entries(root: Path) -> list[os.DirEntry[str]]:
    """The entries of ``root``, the directory handle closed before returning (a scandir iterator left
    unfinished, as by ``any``, stays open until collected: a ResourceWarning)."""
    with os.scandir(root) as entries:
        return list(entries)


def image_folder(root: str | os.PathLike[str], names: Sequence[str] | None = None) -> ImageList:
    """The ImageFolder layout: ``root/<class>/**/<image>``, classes sorted by name, or numbered by
    ``names`` (the class names in id order) when given."""
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"{root} is not a folder of images", option="src")
    classes = _class_folders(root)
    if not classes:
        raise EmptyDatasetError(f"{root} has no class folders; the ImageFolder layout is root/<class>/<image>")
    if names is None:
        _warn_if_splits_disagree(root, classes)
    ids = {c: i for i, c in enumerate(classes)} if names is None else _ids_of(names, classes, f"{root}: class folder")
    paths: list[str] = []
    labels: list[int] = []
    ignored: list[str] = []
    empty = []
    for cls in classes:
        idx = ids[cls]
        found = 0
        for dirpath, dirnames, filenames in sorted(os.walk(root / cls, followlinks=True)):
            dirnames.sort()
            for fname in sorted(filenames):
                full = os.path.join(dirpath, fname)
                if _is_image(fname):
                    paths.append(full)
                    labels.append(idx)
                    found += 1
                else:
                    ignored.append(full)
        if not found:
            empty.append(cls)
    if empty:
        raise EmptyDatasetError(f"{root}: class folder(s) {empty} hold no image with an extension in {IMG_EXTENSIONS}")
    kept = tuple(classes) if names is None else tuple(names)
    return ImageList(tuple(paths), tuple(labels), kept, str(root), tuple(ignored))


def _class_folders(folder: Path) -> list[str]:
    return sorted(e.name for e in _entries(folder) if e.is_dir() and not e.name.startswith("."))


def _warn_if_splits_disagree(root: Path, classes: list[str]) -> None:
    """Warn when a sibling of ``root`` (another split: ``data/val`` beside ``data/train``) has class
    folders of which one shared with ``root`` gets another id by the sorted-folders rule."""
    folder = root.absolute()
    try:
        siblings = [
            e for e in _entries(folder.parent) if e.is_dir() and not e.name.startswith(".") and e.name != folder.name
        ]
    except OSError:
        return
    if len(siblings) > SIBLINGS_SCANNED:
        return
    ids = {c: i for i, c in enumerate(classes)}
    for sibling in sorted(siblings, key=lambda e: e.name):
        try:
            theirs = _class_folders(Path(sibling.path))
        except OSError:
            continue
        moved = [(c, ids[c], i) for i, c in enumerate(theirs) if c in ids and ids[c] != i]
        if moved:
            name, here, there = moved[0]
            warnings.warn(
                f"{root} numbers its class folders by their sorted names (as torchvision's ImageFolder does), and "
                f"so does {sibling.path}, which has other ones: {name!r} is label {here} here but {there} there "
                f"(missing here: {sorted(set(theirs) - ids.keys())}; missing there: {sorted(ids.keys() - set(theirs))}). "
                "Number both splits by one map: pass the training split's, e.g. label_names=train.label_names "
                "(or class_to_idx=; --label-names-from TRAIN_STORE); passing a map silences this warning",
                SplitClassesWarning,
                stacklevel=4,
            )
            return


def _ids_of(names: Sequence[str], found: Iterable[str], what: str) -> dict[str, int]:
    """``name -> id`` of the map ``names``; InputError naming the ``found`` names outside it."""
    ids = {str(n): i for i, n in enumerate(names)}
    outside = sorted({str(f) for f in found} - ids.keys())
    if outside:
        raise InputError(
            f"{what}(s) {outside} not in the given label map {list(ids)}; add them to label_names/class_to_idx "
            "(the first split's map), or move the files out"
        )
    return ids


def read_labels(path: str | os.PathLike[str]) -> dict[str, Any]:
    """``file -> label`` from a CSV (``file,label``; header optional) or a JSON labels file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the labels file {path} ({exc})", option="labels") from exc
    if path.suffix.lower() == ".json":
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path} is not valid JSON ({exc})", option="labels") from exc
        if isinstance(obj, Mapping):
            return {str(k): v for k, v in obj.items()}
        if isinstance(obj, list) and all(
            isinstance(r, Mapping) and "label" in r and ("file" in r or "path" in r) for r in obj
        ):
            return {str(r.get("file", r.get("path"))): r["label"] for r in obj}
        raise ConfigError(f'{path}: expected {{"file": label}} or [{{"file": ..., "label": ...}}]', option="labels")
    rows = [r for r in csv.reader(text.splitlines()) if r and any(c.strip() for c in r)]
    if rows and rows[0][0].strip().lower() in ("file", "filename", "path", "image", "name", "id"):
        rows = rows[1:]
    bad = next((i for i, r in enumerate(rows) if len(r) < 2), None)
    if bad is not None:
        raise ConfigError(f"{path}: line {bad + 1} is {rows[bad]!r}; each line needs file,label", option="labels")
    return {r[0].strip(): r[1].strip() for r in rows}


def _encode_labels(
    values: list[Any], names: Sequence[str] | None = None, where: str = "the labels"
) -> tuple[tuple[int, ...], tuple[str, ...] | None]:
    """Integer labels stay as they are; names become indices of their sorted set, or of ``names``
    (the class names in id order; then integer labels are ids of it, and names are looked up)."""

    def is_int(v: Any) -> bool:
        return (isinstance(v, int) and not isinstance(v, bool)) or (
            isinstance(v, str) and v.strip().lstrip("-").isdigit()
        )

    if all(is_int(v) for v in values):  # ImageList checks the range
        return tuple(int(v) for v in values), None if names is None else tuple(str(n) for n in names)
    if names is not None:
        ids = _ids_of(names, (str(v) for v in values), f"{where}: label")
        return tuple(ids[str(v)] for v in values), tuple(str(n) for n in names)
    classes = tuple(sorted({str(v) for v in values}))
    index = {c: i for i, c in enumerate(classes)}
    return tuple(index[str(v)] for v in values), classes


def flat_folder(
    root: str | os.PathLike[str],
    labels: str | os.PathLike[str] | Mapping[str, Any] | None = None,
    names: Sequence[str] | None = None,
) -> ImageList:
    """Images directly in ``root``, labeled by a CSV/JSON file or a mapping of file name to label.

    With a labels file, exactly the files it names are used, in its order; a named file that
    is missing is reported when read. Without labels, every image file in ``root``, sorted.
    With ``names`` (the class names in id order), each label is looked up by its text.
    """
    root = Path(root)
    if labels is None:
        found = sorted(e.name for e in _entries(root) if e.is_file())
        paths = [str(root / f) for f in found if _is_image(f)]
        ignored = [str(root / f) for f in found if not _is_image(f)]
        return ImageList(tuple(paths), None, None, str(root), tuple(ignored))
    table = labels if isinstance(labels, Mapping) else read_labels(labels)
    if not table:
        raise EmptyDatasetError(f"the labels for {root} list no file")
    where = f"the labels of {root}" if isinstance(labels, Mapping) else f"the labels file {labels}"
    files = list(table)
    ints, classes = _encode_labels([table[f] for f in files], names, where)
    return ImageList(tuple(str(root / f) for f in files), ints, classes, str(root))


def from_paths(
    paths: Iterable[str | os.PathLike[str]], labels: Sequence[Any] | None = None, names: Sequence[str] | None = None
) -> ImageList:
    """A list of image files, optionally with labels: integers, or names turned into classes
    (sorted, or looked up in ``names``, the class names in id order)."""
    files = tuple(str(p) for p in paths)
    if labels is None:
        return ImageList(files)
    ints, found = _encode_labels(list(labels), names, "the labels of the image list")
    return ImageList(files, ints, found)


def from_dataset(dataset: Any, names: Sequence[str] | None = None) -> ImageList:
    """The files of a torchvision-style ImageFolder/DatasetFolder object (its ``samples``); with
    ``names`` (the class names in id order), its labels renumbered by name (it needs ``classes``)."""
    samples = getattr(dataset, "samples", None) or getattr(dataset, "imgs", None)
    if samples is None:
        raise ConfigError(
            f"{type(dataset).__name__} has no .samples list of (path, label); pass its image files instead",
            option="src",
        )
    paths = tuple(str(s[0]) for s in samples)
    labels = tuple(int(s[1]) for s in samples)
    classes = getattr(dataset, "classes", None)
    root = getattr(dataset, "root", None)
    where = None if root is None else str(root)
    if names is not None:
        if classes is None:
            raise ConfigError(
                f"{type(dataset).__name__} has no .classes, so its labels cannot be renumbered by label_names; "
                "pass its files and label names instead",
                option="label_names",
            )
        ids = _ids_of(names, classes, f"{type(dataset).__name__}: class")
        return ImageList(paths, tuple(ids[str(classes[i])] for i in labels), tuple(names), where)
    return ImageList(paths, labels, tuple(classes) if classes is not None else None, where)


def find_images(src: Any, labels: Any = None, names: Sequence[str] | None = None) -> ImageList:
    """Any of the layouts above, recognized from ``src`` (and ``labels``); with ``names`` (the class
    names in id order, see :func:`stoker.labels.label_map`), labels are numbered by that map."""
    if isinstance(src, ImageList):
        if names is not None and src.labels is not None and tuple(src.classes or ()) != tuple(names):
            raise ConfigError(
                f"the ImageList's classes {list(src.classes or ())} are not the given label map {list(names)}; "
                "build it with that map (find_images(..., names=...))",
                option="label_names",
            )
        return src
    if hasattr(src, "samples") or hasattr(src, "imgs"):
        return from_dataset(src, names)
    if isinstance(src, (list, tuple)):
        return from_paths(src, labels, names=names)
    if not isinstance(src, (str, os.PathLike)):
        raise ConfigError(
            f"cannot find images in a {type(src).__name__}; pass a folder, a list of paths or an ImageFolder dataset",
            option="src",
        )
    root = Path(src)
    if not root.exists():
        raise ConfigError(f"{root} does not exist", option="src")
    if not root.is_dir():
        raise ConfigError(f"{root} is a file; pass a folder of images (or a list of paths)", option="src")
    if labels is not None:
        return flat_folder(root, labels, names)
    for name in LABEL_FILES:
        if (root / name).is_file():
            return flat_folder(root, root / name, names)
    if any(e.is_dir() and not e.name.startswith(".") for e in _entries(root)):
        return image_folder(root, names)
    if names is not None:
        raise ConfigError(
            f"{root} holds no class folders and no labels file, so a label map has no labels to number",
            option="label_names",
        )
    return flat_folder(root)


__all__ = [
    "IMG_EXTENSIONS",
    "ImageList",
    "SplitClassesWarning",
    "find_images",
    "flat_folder",
    "from_dataset",
    "from_paths",
    "image_folder",
    "read_labels",
]
