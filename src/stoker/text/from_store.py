"""A text store opened as the user asked: ``tokenizer=`` and ``max_length=`` checked against what it holds.

A store was tokenized and cut once, at conversion; its metadata (``"stoker.text"``) records the
tokenizer (name and fingerprint), ``max_length`` and the special tokens put around a text. So:

* options not given (:data:`UNSET`) take the store's values;
* the same tokenizer (same fingerprint) or the same ``max_length`` change nothing;
* a smaller ``max_length`` cuts the stored rows further, keeping the closing special tokens
  as the tokenizer's own truncation does, and counts them as truncated (single texts only:
  the longest-first cut of sentence pairs cannot be replayed from already cut pairs);
* a larger ``max_length`` (or ``None``, no cut), or another tokenizer, is a ConfigError that
  says what the store holds.
"""

from __future__ import annotations

import enum
from typing import Any, Literal

from stoker.errors import ConfigError
from stoker.store.reader import Store
from stoker.text.batches import StoredRows
from stoker.text.tokenizer import TextTokenizer, check_max_length, resolve


class Unset(enum.Enum):
    """The type of :data:`UNSET`."""

    token = "not given"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Literal[Unset.token] = Unset.token  # an option the user did not give (not the same as None)


def store_tokenizer(store: Store, info: dict[str, Any], tokenizer: Any) -> TextTokenizer | None:
    """The given tokenizer resolved, when it is the one the store was written with (else ConfigError)."""
    if tokenizer is UNSET:
        return None
    tok = resolve(tokenizer)
    held = info.get("tokenizer_fingerprint")
    same = tok.fingerprint == held if held is not None else tok.name == info.get("name")
    if not same:
        raise ConfigError(
            f"tokenizer={tok.name!r} is not the tokenizer the store {store.path} was written with "
            f"({info.get('name')!r}, fingerprint {held}); its ids would mean other words. Leave tokenizer= out to "
            "use the store's, or convert the text again with this tokenizer",
            option="tokenizer",
        )
    return tok


def store_rows(store: Store, max_length: Any) -> StoredRows:
    """The store's rows, cut further when ``max_length`` is below the store's (see the module doc)."""
    rows = StoredRows(store)
    if max_length is UNSET:
        return rows
    check_max_length(max_length)
    info = rows.info
    if "max_length" not in info:
        raise ConfigError(
            f"the store {store.path} does not record the max_length it was written with, so max_length={max_length} "
            "cannot be checked; leave max_length= out, or convert the text again with stoker.convert.text",
            option="max_length",
        )
    held = info["max_length"]
    if max_length == held:
        return rows
    if max_length is None or (held is not None and max_length > held):
        raise ConfigError(
            f"max_length={max_length}: the store {store.path} holds examples cut to max_length={held} at conversion, "
            f"so longer ones cannot come back; pass max_length <= {held} (or leave it out), or convert the text again "
            f"with --max-length {max_length}",
            option="max_length",
        )
    if rows.has_pairs:
        raise ConfigError(
            f"max_length={max_length}: the store {store.path} holds sentence pairs cut to max_length={held}; a "
            "pair's longest-first cut cannot be replayed on cut pairs, so convert the text again with "
            f"--max-length {max_length} (or leave max_length= out)",
            option="max_length",
        )
    if "special_tail" not in info:
        raise ConfigError(
            f"max_length={max_length}: the store {store.path} does not record the special tokens around a text "
            "(written by an older stoker), so it cannot be cut further the tokenizer's way; convert the text again "
            f"with --max-length {max_length}, or leave max_length= out",
            option="max_length",
        )
    return StoredRows(store, max_length, int(info["special_tail"]))


__all__ = ["UNSET", "Unset", "store_rows", "store_tokenizer"]
