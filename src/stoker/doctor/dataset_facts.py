"""What the doctor learns of a script's Dataset object, for advice that names the exact command.

Runs in the script's process, on the Dataset a loader reads:

- :func:`importable_ref`: a ``module:attribute`` that ``stoker convert dataset`` can import (a
  module-level name bound to the Dataset, or its class when that takes no arguments), and a note
  when importing that module would run the script's training loop;
- :func:`image_root`: the folder of image files the Dataset reads (a folder attribute such as
  ``root``, or the common folder of a ``samples``/``imgs``/``files`` list), or ``""``;
- :func:`random_transforms`: class names of random transforms among its attributes
  (``RandomResizedCrop``, ``RandAugment``, ``ColorJitter``...);
- :func:`draws_randomly`: ``__getitem__(i)`` called twice, outputs compared; the random number
  generators of ``random``, numpy and torch are restored afterwards, so the script's own random
  stream is the one it would have had.
"""

from __future__ import annotations

import inspect
import os
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp")
ROOT_ATTRIBUTES = (
    "root",
    "root_dir",
    "data_root",
    "data_dir",
    "image_dir",
    "img_dir",
    "images_dir",
    "directory",
    "folder",
    "dir",
    "data_path",
    "path",
)
LIST_ATTRIBUTES = ("samples", "imgs", "files", "paths", "image_paths", "images")
RANDOM_NAMES = frozenset(
    {"ColorJitter", "TrivialAugmentWide", "AutoAugment", "AugMix", "MixUp", "CutMix", "ElasticTransform"}
)
_MAX_DEPTH = 8  # a list counts as a level: Compose([Compose([RandomCrop()])]) is 5 down
_MAX_ITEMS = 64
_MAX_VISITS = 2000


def is_random_transform(obj: Any) -> bool:
    """Whether ``obj``'s class is a transform that draws at random (by its torchvision-style name)."""
    name = type(obj).__name__
    return name.startswith(("Random", "Rand")) or name in RANDOM_NAMES


def _children(obj: Any) -> Iterator[Any]:
    if isinstance(obj, (list, tuple)):
        yield from obj[:_MAX_ITEMS]
    elif isinstance(obj, dict):
        yield from list(obj.values())[:_MAX_ITEMS]
    elif hasattr(obj, "__dict__") and not isinstance(obj, type) and not inspect.ismodule(obj):
        yield from list(vars(obj).values())[:_MAX_ITEMS]


def random_transforms(dataset: Any) -> tuple[str, ...]:
    """Class names of the random transforms found in ``dataset``'s attributes (nested lists, Compose)."""
    found: dict[str, None] = {}
    seen: set[int] = set()
    todo = [(child, 1) for child in _children(dataset)]
    while todo and len(seen) < _MAX_VISITS:
        obj, depth = todo.pop()
        if id(obj) in seen or isinstance(obj, (str, bytes, int, float, bool)) or obj is None:
            continue
        seen.add(id(obj))
        if is_random_transform(obj):
            found[type(obj).__name__] = None
        if depth < _MAX_DEPTH and type(obj).__module__.split(".")[0] not in ("numpy", "torch", "pyarrow"):
            todo.extend((child, depth + 1) for child in _children(obj))
    return tuple(found)


def _main_module() -> tuple[str, str]:
    """The importable name of the script (``train`` for ``python train.py``) and a note about importing it."""
    main = sys.modules.get("__main__")
    file = getattr(main, "__file__", None)
    if not file:
        return "", "the Dataset is defined in an interactive session: move it into a module"
    path = Path(file).resolve()
    note = ""
    try:
        source = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        source = ""
    if "__name__ ==" not in source and "__name__==" not in source:
        note = (
            f"importing {path.name} runs its training loop: put the loop under "
            "if __name__ == '__main__': or move the Dataset into its own module"
        )
    if path.parent != Path.cwd().resolve():
        note = "; ".join(x for x in (f"run it from {path.parent}", note) if x)
    return path.stem, note


def _bound_name(module: Any, obj: Any) -> str:
    for name, value in list(vars(module).items()) if module is not None else ():
        if value is obj and not name.startswith("_"):
            return name
    return ""


def _takes_no_arguments(cls: type) -> bool:
    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values())


def importable_ref(dataset: Any) -> tuple[str, str]:
    """``("module:attribute", note)`` naming the Dataset for ``stoker convert dataset``; ``("", why)`` if none."""
    cls = type(dataset)
    candidates = [cls.__module__] + (["__main__"] if cls.__module__ != "__main__" else [])
    for modname in candidates:
        var = _bound_name(sys.modules.get(modname), dataset)
        if var:
            if modname == "__main__":
                stem, note = _main_module()
                return (f"{stem}:{var}", note) if stem else ("", note)
            return f"{modname}:{var}", ""
    if "<locals>" not in cls.__qualname__ and _takes_no_arguments(cls):
        if cls.__module__ == "__main__":
            stem, note = _main_module()
            return (f"{stem}:{cls.__qualname__}", note) if stem else ("", note)
        return f"{cls.__module__}:{cls.__qualname__}", ""
    return "", (
        f"no module-level name holds the Dataset and {cls.__qualname__}() needs arguments: "
        f"bind it to a module-level name, e.g. train_set = {cls.__qualname__}(...)"
    )


def _has_images(folder: str) -> bool:
    """Whether ``folder`` holds image files, directly or one level down (the first entries looked at)."""
    try:
        with os.scandir(folder) as it:
            entries = [e for _, e in zip(range(200), it)]
        for e in entries:
            if e.is_file() and e.name.lower().endswith(IMAGE_SUFFIXES):
                return True
        for e in entries:
            if e.is_dir():
                with os.scandir(e.path) as sub:
                    if any(s.name.lower().endswith(IMAGE_SUFFIXES) for _, s in zip(range(50), sub)):
                        return True
    except OSError:
        return False
    return False


def _listed_folder(items: Any) -> str:
    paths = []
    for item in list(items)[:1000] if isinstance(items, (list, tuple)) else ():
        first = item[0] if isinstance(item, (list, tuple)) and item else item
        if isinstance(first, (str, os.PathLike)):
            paths.append(os.path.dirname(os.path.abspath(os.fspath(first))))
    if not paths:
        return ""
    try:
        return os.path.commonpath(paths)
    except ValueError:
        return ""


def image_root(dataset: Any) -> str:
    """The absolute folder of image files ``dataset`` reads, or ``""`` when none is found."""
    attrs = getattr(dataset, "__dict__", {})
    for name in ROOT_ATTRIBUTES:
        value = attrs.get(name)
        if isinstance(value, (str, os.PathLike)) and os.path.isdir(value) and _has_images(os.fspath(value)):
            return os.path.abspath(os.fspath(value))
    for name in LIST_ATTRIBUTES:
        folder = _listed_folder(attrs.get(name))
        if folder and os.path.isdir(folder) and _has_images(folder):
            return folder
    return ""


def same(a: Any, b: Any) -> bool | None:
    """Whether two ``__getitem__`` outputs are equal (tensors, arrays, containers, scalars); None: cannot tell."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return False
        return _all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and _all(same(x, y) for x, y in zip(a, b))
    module = type(a).__module__.split(".")[0]
    if module == "torch":
        import torch

        if isinstance(a, torch.Tensor):
            return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b) or _nan_equal(a, b))
    if module == "numpy":
        import numpy as np

        if isinstance(a, np.ndarray):
            return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if module == "PIL" and hasattr(a, "tobytes"):
        return a.size == b.size and a.mode == b.mode and a.tobytes() == b.tobytes()
    try:
        equal = a == b
    except Exception:  # noqa: BLE001 -- a user type whose == raises: cannot tell
        return None
    return equal if isinstance(equal, bool) else None


def _nan_equal(a: Any, b: Any) -> bool:
    import torch

    return bool(a.is_floating_point() and torch.allclose(a, b, rtol=0.0, atol=0.0, equal_nan=True))


def _all(results: Iterator[bool | None]) -> bool | None:
    unknown = False
    for r in results:
        if r is False:
            return False
        unknown = unknown or r is None
    return None if unknown else True


@contextmanager
def _saved_random_state() -> Iterator[None]:
    """The states of ``random``, numpy's and torch's global generators, restored on exit."""
    np, torch = sys.modules.get("numpy"), sys.modules.get("torch")
    saved = random.getstate(), np and np.random.get_state(), torch and torch.get_rng_state()
    try:
        yield
    finally:
        random.setstate(saved[0])
        if np is not None:
            np.random.set_state(saved[1])
        if torch is not None:
            torch.set_rng_state(saved[2])


def draws_randomly(dataset: Any, index: Any) -> bool | None:
    """Whether ``dataset[index]`` differs between two calls (random augmentation); None if it raised or cannot tell.

    The global random generators are restored afterwards: the script draws what it would have drawn.
    """
    try:
        with _saved_random_state():
            first = dataset[index]
            second = dataset[index]
    except Exception:  # noqa: BLE001 -- the script's own error shows when its loader calls it
        return None
    equal = same(first, second)
    return None if equal is None else not equal
