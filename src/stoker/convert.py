"""``stoker.convert``: build stores from other data, one function per kind of input.

Each function writes a store and returns its path; the ``stoker convert KIND`` commands call
them. The domain modules (``stoker.text``, ``stoker.vision``, ``stoker.sources``) hold the work;
this module only names it, importing lazily so that ``import stoker`` stays light.
"""

from __future__ import annotations

from typing import Any

__all__: list[str] = []


def images(src: Any, store: Any, mode: str = "encoded", **options: Any) -> Any:
    """Image files to a store: see :func:`stoker.vision.convert.convert_images`.

    ``src`` is a folder (ImageFolder layout, or flat with a CSV/JSON labels file), a list of
    paths, or a torchvision-style ImageFolder object; ``mode`` is ``"encoded"`` (JPEG bytes,
    decoded and augmented at load time) or ``"resized"`` (uint8 arrays of ``size``).
    Returns a :class:`stoker.vision.ConvertReport` (its ``path``, ``rows`` and ``skipped``).
    """
    from stoker.vision.convert import convert_images

    return convert_images(src, store, mode, **options)


__all__.append("images")
