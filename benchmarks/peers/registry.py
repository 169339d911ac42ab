"""Which contenders run on which workload, in which environment, with which functions.

The array workloads (images_uint8, token_ids, tensors) share ``contenders.CONTENDERS``; the
real-data workloads have their own tables (``contenders_text.TEXT``, ``contenders_images.IMAGES``),
which may add rows (a second stoker row) and name peers that have no sensible path (their
``prepare`` raises with the reason, and the table prints it).
"""

from __future__ import annotations

from typing import Any

from contenders import CONTENDERS
from contenders_images import IMAGES
from contenders_text import TEXT

BY_WORKLOAD = {"text_bert": TEXT, "images_jpeg": IMAGES}


def contenders_for(workload: str) -> dict[str, tuple[str, Any, Any]]:
    """name -> (environment, prepare, load) for ``workload``, in table order."""
    table = BY_WORKLOAD.get(workload)
    if table is None:
        return dict(CONTENDERS)
    return {name: (CONTENDERS.get(name, ("peers",))[0], prepare, load) for name, (prepare, load) in table.items()}
