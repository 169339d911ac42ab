"""Long lines tokenized from a prefix, with exactly the ids of the whole line.

With ``max_length`` set, a single text longer than ``cut_at`` characters (:func:`cut_bound`) is
tokenized from a prefix that ends just before an ASCII space, after a printable ASCII character,
and whose own encoding overflows ``max_length``. For the tokenizers :func:`cut_bound` allows
(char-by-char normalizers, pre-tokenizers that split at whitespace, models that tokenize each word
alone, no added token holding whitespace) the prefix's tokens are the line's first tokens, so the
kept ids and the ``truncated`` flag are the whole line's. A prefix that does not overflow is
doubled, up to the whole line. Each text of a sentence pair is cut on its own. The argument in
full is in ``docs/history/text-notes.md``.

Without ``max_length`` a text is tokenized whole: one over :data:`MAX_WHOLE_CHARS` characters is an
:class:`~stoker.errors.InputError` (the tokenizer takes tens of bytes per character), never an
allocation that aborts the interpreter.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from stoker.errors import InputError

MAX_WHOLE_CHARS = 2**23  # a text tokenized whole (no max_length) has at most this many characters

# the parts of a tokenizer under which a prefix ending before " " tokenizes as the line's first words
_LOCAL_NORMALIZERS = {"BertNormalizer", "Lowercase", "NFC", "NFD", "NFKC", "NFKD", "StripAccents"}
_WORD_PRE_TOKENIZERS = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit", "Punctuation", "Digits", "ByteLevel"}
_WORD_MODELS = {"WordPiece", "BPE", "WordLevel", "Unigram"}
_PREFIX_CHARS = frozenset(chr(c) for c in range(0x21, 0x7F))  # printable ASCII but space


class LongLineWarning(UserWarning):
    """Lines longer than :attr:`~stoker.text.TextTokenizer.cut_at` were tokenized from a prefix (same ids)."""


def _parts(spec: Any, key: str) -> list[dict[str, Any]]:
    """A normalizer or pre-tokenizer spec as its list of steps (a ``Sequence`` flattened)."""
    if spec is None:
        return []
    if spec.get("type") == "Sequence":
        return [part for sub in spec.get(key, []) for part in _parts(sub, key)]
    return [spec]


def _spec(part: Any) -> Any:
    """The JSON spec of one part of a tokenizer (normalizer, pre-tokenizer), without the vocabulary."""
    return None if part is None else json.loads(part.__getstate__())


def cut_bound(tok: Any, max_length: int | None, longest: int | None = None) -> int | None:
    """The length in characters above which a single text may be tokenized from a prefix:
    ``(max_length + 1)`` times the longest vocabulary entry plus one, at least 1,024. None when
    ``max_length`` is None or the tokenizer is not one whose words are tokenized independently of
    what follows them. ``longest``: the longest vocabulary entry when the caller read it (a
    ``vocab.txt``), else taken from the tokenizer's vocabulary (never dumped to JSON)."""
    if max_length is None:
        return None
    norms = _parts(_spec(tok.normalizer), "normalizers")
    pres = _parts(_spec(tok.pre_tokenizer), "pretokenizers")
    if not pres or any(n.get("type") not in _LOCAL_NORMALIZERS for n in norms):
        return None
    for pre in pres:
        kind = pre.get("type")
        if kind == "Metaspace" and pre.get("split", True):
            continue
        if kind not in _WORD_PRE_TOKENIZERS or (kind == "ByteLevel" and not pre.get("use_regex", True)):
            return None
    if type(tok.model).__name__ not in _WORD_MODELS:
        return None
    added = [t.content for t in tok.get_added_tokens_decoder().values()]
    if any(any(ch.isspace() for ch in t) for t in added):
        return None
    if longest is None:
        longest = max(map(len, tok.get_vocab(with_added_tokens=True)), default=1)
    longest = max([longest, *map(len, added)])
    return max(1024, (max_length + 1) * (longest + 1))


def longest_entry(path: str | Path) -> int:
    """The longest entry of a ``vocab.txt`` in characters (one C-level split of the file; an entry
    holding a space counts as its longest part: the bound it feeds is only where cutting starts)."""
    return max(map(len, Path(path).read_text(encoding="utf-8", errors="replace").split()), default=1)


def check_whole(texts: list[str], pairs: list[str] | None) -> None:
    """An InputError for a text over :data:`MAX_WHOLE_CHARS` characters (no max_length cuts it)."""
    for side in (texts, pairs or ()):
        for i, text in enumerate(side):
            if len(text) > MAX_WHOLE_CHARS:
                raise InputError(
                    f"text {i} of this batch ({text[:40]!r}...) has {len(text):,} characters, over the "
                    f"{MAX_WHOLE_CHARS:,} tokenized whole without max_length (the tokenizer takes tens of bytes "
                    "per character): pass max_length= to cut it, or split the document"
                )


def prefix(text: str, limit: int) -> str:
    """The longest ``text[:c]`` with ``c <= limit``, ``text[c] == " "`` and ``text[c - 1]`` printable
    ASCII; ``""`` when there is none (the caller then tries a longer limit)."""
    c = text.rfind(" ", 0, limit + 1)
    while c > 0 and text[c - 1] not in _PREFIX_CHARS:
        c = text.rfind(" ", 0, c)
    return text[:c] if c > 0 else ""


def _overflowing_prefix(tok: Any, text: str, limit: int) -> tuple[str, bool]:
    """The shortest prefix of ``text`` (from ``limit`` characters, doubling) whose own encoding
    overflows ``max_length``, or ``text`` itself when none shorter does; and whether it is shorter."""
    while limit < len(text):
        head = prefix(text, limit)
        if head and tok.encode_batch_fast([head])[0].overflowing:
            return head, True
        limit *= 2
    return text, False


def encode_cut(tok: Any, cut_at: int | None, texts: list[str], pairs: list[str] | None) -> tuple[list[Any], Any]:
    """``tok.encode_batch_fast`` of ``texts`` (or of the pairs), each text over ``cut_at`` characters
    tokenized from a prefix with the same ids; and which rows were cut (a bool array; None for
    single texts of which none was long)."""
    if pairs is not None:
        cut = np.zeros(len(texts), dtype=bool)
        sides = [list(texts), list(pairs)]
        if cut_at is not None:  # each text of a pair cut on its own
            for side in sides:
                for i, text in enumerate(side):
                    if len(text) > cut_at:
                        side[i], was_cut = _overflowing_prefix(tok, text, cut_at)
                        cut[i] |= was_cut
        return tok.encode_batch_fast(list(zip(*sides))), cut
    long = [] if cut_at is None else [i for i, t in enumerate(texts) if len(t) > cut_at]
    inputs = list(texts)
    for i in long:
        inputs[i] = prefix(texts[i], cut_at or 0)
    encs = tok.encode_batch_fast(inputs)
    if not long:
        return encs, None
    cut = np.zeros(len(texts), dtype=bool)
    for i in long:  # a prefix that did not overflow: longer ones are tried, up to the whole line
        cut[i] = bool(inputs[i] and encs[i].overflowing)
        if not cut[i]:
            inputs[i], cut[i] = _overflowing_prefix(tok, texts[i], 2 * (cut_at or 0))
            encs[i] = tok.encode_batch_fast([inputs[i]])[0]
    return encs, cut


__all__ = ["MAX_WHOLE_CHARS", "LongLineWarning", "check_whole", "cut_bound", "encode_cut", "longest_entry", "prefix"]
