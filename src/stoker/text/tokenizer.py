"""Which tokenizer, and how a batch of texts becomes token ids.

:func:`resolve` accepts what users have at hand and returns a :class:`TextTokenizer`: a
private copy of a Hugging Face ``tokenizers.Tokenizer`` (padding off, truncation set by us),
its pad id and the smallest integer dtype that holds its ids.

* a ``tokenizers.Tokenizer``;
* a transformers *fast* tokenizer (anything with ``backend_tokenizer``);
* a path to a ``tokenizer.json``, a WordPiece ``vocab.txt``, or a directory holding one;
* the name ``"bert-base-uncased"``: the WordPiece vocabulary bundled in ``stoker/text/data``
  (see ``data/NOTICE``), so it works with no network.

:meth:`TextTokenizer.encode` tokenizes a whole batch in one ``encode_batch`` call (the Rust
tokenizer releases the GIL and spreads the batch over its own threads) and returns flat ids
with offsets, ready for one padding pass.

**Long lines are cut before tokenizing, with the same ids.** With ``max_length`` set, a single
text longer than :attr:`TextTokenizer.cut_at` characters is tokenized from a prefix only, so a
50 MB line costs what its first few kilobytes cost. The ids (and the ``truncated`` flag) are
exactly those of the whole line truncated by the tokenizer, because the prefix is chosen so that:

1. it ends just before an ASCII space, after a printable ASCII character. For the tokenizers
   allowed here (:func:`cut_bound`: char-by-char normalizers; pre-tokenizers that split at
   whitespace; models that tokenize each pre-tokenized word alone; no added token containing
   whitespace) the words of the prefix are then exactly the first words of the line, normalized
   and tokenized the same, so the prefix's tokens are the first tokens of the line;
2. it gives *more* than ``max_length`` tokens (its encoding overflows): then the kept tokens are
   the line's first ones, and the line is truncated too.

A prefix that fails (2), e.g. one long word or a run of spaces, is doubled and tried again, up
to the whole line (the old cost, for such lines only). A line of at most ``cut_at`` characters and
any tokenizer outside that list are tokenized whole, as before. Each text of a sentence pair is cut
the same way, on its own: truncation (longest first) keeps at most ``max_length`` tokens of either
text, so a text that keeps more than ``max_length`` tokens gives the pair the same ids as the whole.

**Without ``max_length`` a text is tokenized whole**, and the tokenizer's memory grows with it (tens
of bytes per character): a text over :data:`MAX_WHOLE_CHARS` characters is an :class:`InputError`
(pass ``max_length``, or split the document), never an allocation that aborts the interpreter.
``cut_at`` itself only decides where to start: ``(max_length + 1)`` times the longest vocabulary
entry plus one separator, at least 1,024 characters, which a line of ordinary words never needs
to grow.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import warnings
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from stoker.errors import ConfigError, InputError
from stoker.store.columns import Ragged


class LongLineWarning(UserWarning):
    """Lines longer than :attr:`TextTokenizer.cut_at` were tokenized from a prefix (same ids)."""


BUNDLED = {"bert-base-uncased": "bert-base-uncased-vocab.txt"}
_PAD_NAMES = ("[PAD]", "<pad>", "<|padding|>")


def _tokenizers() -> Any:
    try:
        import tokenizers
    except ImportError as exc:  # pragma: no cover - the text extra installs it
        raise ConfigError(
            "stoker.text needs the 'tokenizers' package: pip install 'stoker[text]'", option="tokenizer"
        ) from exc
    return tokenizers


def smallest_uint(vocab_size: int) -> np.dtype:
    """The smallest integer dtype that holds ids ``0 .. vocab_size - 1``."""
    for dtype in (np.uint8, np.uint16, np.int32):
        if vocab_size - 1 <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def wordpiece_from_vocab(path: str | os.PathLike[str], lowercase: bool = True) -> Any:
    """A BERT WordPiece tokenizer built from a ``vocab.txt`` (as BertTokenizerFast builds it).

    The file is read once, by the Rust model (``WordPiece.from_file``): no Python dict of the
    vocabulary is made."""
    tk = _tokenizers()
    from tokenizers import decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    model = WordPiece.from_file(str(path), unk_token="[UNK]", max_input_chars_per_word=100)
    ids = {t: model.token_to_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")}
    for special in ("[CLS]", "[SEP]", "[UNK]"):
        if ids[special] is None:
            raise ConfigError(
                f"{path}: a BERT vocab.txt must contain {special}; this one does not (is it a WordPiece vocabulary?)",
                option="tokenizer",
            )
    tok = tk.Tokenizer(model)
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])],
    )
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens([tk.AddedToken(t, special=True) for t, i in ids.items() if i is not None])
    return tok


@dataclass(frozen=True)
class TextTokenizer:
    """A tokenizer ready for batches.

    Attributes:
        tokenizer: a private ``tokenizers.Tokenizer`` (padding off; truncation as ``max_length``).
        pad_id: the id that pads batches.
        name: where it came from (kept in a store's metadata).
        max_length: longest encoding, special tokens included (``None``: no truncation).
        cut_at: single texts longer than this many characters are tokenized from a prefix, with
            the same ids (see the module doc); ``None``: every text is tokenized whole.
    """

    tokenizer: Any
    pad_id: int
    name: str
    max_length: int | None = None
    cut_at: int | None = None  # single texts longer than this (chars) are tokenized from a prefix; None: never
    _warned: list[bool] = field(default_factory=lambda: [False], repr=False, compare=False)

    @property
    def vocab_size(self) -> int:
        return int(self.tokenizer.get_vocab_size(with_added_tokens=True))

    @property
    def id_dtype(self) -> np.dtype:
        """The smallest integer dtype holding every id (uint16 for BERT's 30,522)."""
        return smallest_uint(max(self.vocab_size, self.pad_id + 1))

    def encode(self, texts: list[str], pairs: list[str] | None = None, special_tokens: bool = True) -> Encoded:
        """Tokenize a batch in one call; ids come back flat (``Ragged``) in :attr:`id_dtype`."""
        limit = self.cut_at
        if limit is None and self.max_length is None:
            _check_whole(texts, pairs)
        cut = None
        if pairs is not None:
            cut = np.zeros(len(texts), dtype=bool)
            if limit is not None:  # each text of a pair cut on its own (module docstring)
                texts, pairs = list(texts), list(pairs)
                for side in (texts, pairs):
                    for i, text in enumerate(side):
                        if len(text) > limit:
                            side[i], was_cut = self._side_prefix(text)
                            cut[i] |= was_cut
            encs = self.tokenizer.encode_batch_fast(list(zip(texts, pairs)), add_special_tokens=special_tokens)
        else:
            long = [] if limit is None else [i for i, t in enumerate(texts) if len(t) > limit]
            inputs = list(texts)
            for i in long:
                inputs[i] = _prefix(texts[i], limit or 0)
            encs = self.tokenizer.encode_batch_fast(inputs, add_special_tokens=special_tokens)
            if long:
                cut = np.zeros(len(texts), dtype=bool)
                for i in long:
                    encs[i], cut[i] = self._encode_long(texts[i], inputs[i], encs[i], special_tokens)
        if cut is not None and cut.any():
            self._warn_once()
        rows = [e.ids for e in encs]
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = np.fromiter(itertools.chain.from_iterable(rows), dtype=self.id_dtype, count=int(offsets[-1]))
        types = None
        if pairs is not None:
            types = np.fromiter(
                itertools.chain.from_iterable(e.type_ids for e in encs), dtype=np.uint8, count=int(offsets[-1])
            )
        truncated = None
        if self.max_length is not None:  # only an encoding of the full length can have been cut
            truncated = np.zeros(len(rows), dtype=bool)
            full = np.flatnonzero(lengths >= self.max_length)
            truncated[full] = [bool(encs[i].overflowing) for i in full.tolist()]
        return Encoded(Ragged(ids, offsets), None if types is None else Ragged(types, offsets), truncated, cut)

    def _side_prefix(self, text: str) -> tuple[str, bool]:
        """A prefix of one text of a pair that alone gives more than ``max_length`` tokens (the text
        itself, uncut, when none shorter does), and whether it is shorter than the text."""
        limit = self.cut_at or 0
        while limit < len(text):
            prefix = _prefix(text, limit)
            if prefix and self.tokenizer.encode_batch_fast([prefix])[0].overflowing:
                return prefix, True
            limit *= 2
        return text, False

    def _encode_long(self, text: str, prefix: str, enc: Any, special_tokens: bool) -> tuple[Any, bool]:
        """The encoding of ``text`` from its shortest tried prefix that overflows ``max_length``
        (same ids as the whole line's), and whether the text was cut (False: tokenized whole)."""
        limit = self.cut_at or 0
        while not (prefix and enc.overflowing):
            limit *= 2
            if limit >= len(text):
                return self.tokenizer.encode_batch_fast([text], add_special_tokens=special_tokens)[0], False
            prefix = _prefix(text, limit)
            if prefix:
                enc = self.tokenizer.encode_batch_fast([prefix], add_special_tokens=special_tokens)[0]
        return enc, True

    def _warn_once(self) -> None:
        if self._warned[0]:
            return
        self._warned[0] = True
        warnings.warn(
            f"lines longer than {self.cut_at:,} characters are tokenized from their first part only (their ids "
            f"are those of the whole line cut to max_length={self.max_length}); report() and a converted "
            "store's metadata count them as cut_lines. This warning is shown once per tokenizer, at the first "
            "such line.",
            LongLineWarning,
            stacklevel=3,
        )

    @property
    def fingerprint(self) -> str:
        """A hash of the tokenizer's JSON without its truncation and padding settings: two
        tokenizers that give the same ids have the same fingerprint, whatever ``max_length``."""
        spec = json.loads(self.tokenizer.to_str())
        spec["truncation"] = spec["padding"] = None
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]

    def special_tokens(self) -> tuple[int, int]:
        """How many special tokens the tokenizer puts before and after a single text (BERT: 1 and 1)."""
        mask = self.tokenizer.encode("a", add_special_tokens=True).special_tokens_mask
        head = next((i for i, m in enumerate(mask) if not m), len(mask))
        tail = next((i for i, m in enumerate(reversed(mask)) if not m), 0)
        return head, tail

    def describe(self) -> dict[str, Any]:
        """What a store records about the tokenizer that wrote it (``stoker.text`` metadata)."""
        head, tail = self.special_tokens()
        return {
            "name": self.name,
            "pad_id": self.pad_id,
            "vocab_size": self.vocab_size,
            "max_length": self.max_length,
            "tokenizer_fingerprint": self.fingerprint,
            "special_head": head,
            "special_tail": tail,
        }


@dataclass(frozen=True)
class Encoded:
    """One tokenized batch: ids (and type ids for pairs) as flat rows, and which rows were cut."""

    ids: Ragged
    type_ids: Ragged | None
    truncated: np.ndarray | None  # bool per row; None when nothing can have been cut
    cut: np.ndarray | None = None  # bool per row: tokenized from a prefix (same ids); None: none was


def resolve(
    tokenizer: Any = "bert-base-uncased",
    *,
    max_length: int | None = None,
    pad_id: int | None = None,
    lowercase: bool = True,
) -> TextTokenizer:
    """A :class:`TextTokenizer` from a name, a path, a ``tokenizers.Tokenizer`` or a transformers tokenizer.

    ``max_length`` turns on truncation (longest-first for pairs; the special tokens such as
    [CLS] and [SEP] are kept). ``pad_id`` overrides the pad token; without it a tokenizer that
    has no pad token is refused. ``lowercase`` applies to a ``vocab.txt`` only.
    """
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 2):
        raise ConfigError(
            f"max_length must be an integer >= 2 (room for [CLS] and [SEP]), got {max_length!r}", option="max_length"
        )
    tk = _tokenizers()
    hinted_pad: int | None = None
    longest: int | None = None  # the longest vocabulary entry, where a vocab.txt was read
    if isinstance(tokenizer, tk.Tokenizer):
        tok, name = tk.Tokenizer.from_str(tokenizer.to_str()), "tokenizers.Tokenizer"
    elif hasattr(tokenizer, "backend_tokenizer"):  # transformers fast tokenizer
        tok = tk.Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
        name = str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)
        hinted_pad = getattr(tokenizer, "pad_token_id", None)
    elif hasattr(tokenizer, "tokenize") and hasattr(tokenizer, "vocab_size"):
        raise ConfigError(
            f"{type(tokenizer).__name__} is a slow (pure-Python) tokenizer; pass its fast version "
            "(AutoTokenizer.from_pretrained(..., use_fast=True)) or the path of its tokenizer.json / vocab.txt",
            option="tokenizer",
        )
    elif isinstance(tokenizer, (str, os.PathLike)):
        tok, name, longest = _from_name_or_path(tokenizer, lowercase)
    else:
        raise ConfigError(
            f"tokenizer must be a name ('bert-base-uncased'), a path to tokenizer.json or vocab.txt, a tokenizers.Tokenizer "
            f"or a transformers fast tokenizer, not {type(tokenizer).__name__}",
            option="tokenizer",
        )
    if tok.padding:
        hinted_pad = tok.padding.get("pad_id", hinted_pad) if hinted_pad is None else hinted_pad
    tok.no_padding()
    tok.no_truncation()
    if max_length is not None:
        tok.enable_truncation(max_length)
    if pad_id is None:
        pad_id = hinted_pad
    if pad_id is None:
        pad_id = next((tok.token_to_id(t) for t in _PAD_NAMES if tok.token_to_id(t) is not None), None)
    if pad_id is None:
        raise ConfigError(
            f"tokenizer {name!r} has no pad token, so batches of different lengths cannot be padded; pass pad_id=... "
            "(for GPT-style tokenizers the end-of-text id is the usual choice), or use packing=True, which never pads",
            option="pad_id",
        )
    if isinstance(pad_id, bool) or not isinstance(pad_id, (int, np.integer)) or pad_id < 0:
        raise ConfigError(f"pad_id must be an integer >= 0, got {pad_id!r}", option="pad_id")
    return TextTokenizer(tok, int(pad_id), name, max_length, cut_bound(tok, max_length, longest))


# the parts of a tokenizer under which a prefix ending before " " tokenizes as the line's first words
_LOCAL_NORMALIZERS = {"BertNormalizer", "Lowercase", "NFC", "NFD", "NFKC", "NFKD", "StripAccents"}
_WORD_PRE_TOKENIZERS = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit", "Punctuation", "Digits", "ByteLevel"}
_WORD_MODELS = {"WordPiece", "BPE", "WordLevel", "Unigram"}
_PREFIX_CHARS = frozenset(chr(c) for c in range(0x21, 0x7F))  # printable ASCII but space


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
    """The length in characters above which a single text may be tokenized from a prefix (see the
    module doc), or None when ``max_length`` is None or the tokenizer is not one whose words are
    tokenized independently of what follows them. ``longest``: the longest vocabulary entry when
    the caller read it (a ``vocab.txt``), else taken from the tokenizer's vocabulary. The parts are
    read one by one: the vocabulary is never dumped to JSON."""
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


MAX_WHOLE_CHARS = 2**23  # a text tokenized whole (no max_length) has at most this many characters


def _check_whole(texts: list[str], pairs: list[str] | None) -> None:
    """An InputError for a text over :data:`MAX_WHOLE_CHARS` characters (no max_length cuts it)."""
    for side in (texts, pairs or ()):
        for i, text in enumerate(side):
            if len(text) > MAX_WHOLE_CHARS:
                raise InputError(
                    f"text {i} of this batch ({text[:40]!r}...) has {len(text):,} characters, over the "
                    f"{MAX_WHOLE_CHARS:,} tokenized whole without max_length (the tokenizer takes tens of bytes "
                    "per character): pass max_length= to cut it, or split the document"
                )


def _prefix(text: str, limit: int) -> str:
    """The longest ``text[:c]`` with ``c <= limit``, ``text[c] == " "`` and ``text[c - 1]`` printable
    ASCII; ``""`` when there is none (the caller then tries a longer limit)."""
    c = text.rfind(" ", 0, limit + 1)
    while c > 0 and text[c - 1] not in _PREFIX_CHARS:
        c = text.rfind(" ", 0, c)
    return text[:c] if c > 0 else ""


def _from_name_or_path(spec: str | os.PathLike[str], lowercase: bool) -> tuple[Any, str, int | None]:
    """The tokenizer named or found at ``spec``, its name, and (for a ``vocab.txt``) its longest entry."""
    tk = _tokenizers()
    if isinstance(spec, str) and spec in BUNDLED:
        ref = resources.files("stoker.text") / "data" / BUNDLED[spec]
        with resources.as_file(ref) as path:
            return wordpiece_from_vocab(path, lowercase=True), spec, longest_entry(path)
    path = Path(spec)
    if path.is_dir():
        for candidate in ("tokenizer.json", "vocab.txt"):
            if (path / candidate).is_file():
                path = path / candidate
                break
        else:
            raise ConfigError(
                f"{path} holds neither tokenizer.json nor vocab.txt; pass the file itself", option="tokenizer"
            )
    if not path.is_file():
        raise ConfigError(
            f"tokenizer {str(spec)!r} is neither a bundled name ({', '.join(BUNDLED)}) nor an existing file; stoker does not "
            "download tokenizers: pass the path of a tokenizer.json or vocab.txt, or a tokenizer object",
            option="tokenizer",
        )
    if path.suffix == ".json":
        try:
            return tk.Tokenizer.from_file(str(path)), str(path), None
        except Exception as exc:  # tokenizers raises a bare Exception on malformed files
            raise ConfigError(f"{path}: not a Hugging Face tokenizer.json ({exc})", option="tokenizer") from exc
    return wordpiece_from_vocab(path, lowercase), str(path), longest_entry(path)


def longest_entry(path: str | os.PathLike[str]) -> int:
    """The longest entry of a ``vocab.txt`` in characters (one C-level split of the file; an entry
    holding a space counts as its longest part: the bound it feeds is only where cutting starts)."""
    return max(map(len, Path(path).read_text(encoding="utf-8", errors="replace").split()), default=1)


__all__ = [
    "BUNDLED",
    "Encoded",
    "LongLineWarning",
    "TextTokenizer",
    "cut_bound",
    "resolve",
    "smallest_uint",
    "wordpiece_from_vocab",
]
