"""``stoker.convert``: build stores from other data, one function per kind of input.

Each function writes a store and returns its path; the ``stoker convert KIND`` commands call
them. The domain modules (``stoker.text``, ``stoker.vision``, ``stoker.sources``) hold the work;
this module only names it, importing lazily so that ``import stoker`` stays light.
"""

from __future__ import annotations

from typing import Any

__all__: list[str] = []
