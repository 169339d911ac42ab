"""Which tokenizer, and how a batch of texts becomes token ids.

:func:`resolve` accepts what users have at hand and returns a :class:`TextTokenizer`: a
private copy of a Hugging Face ``tokenizers.Tokenizer`` (padding off, truncation set by us),
its pad id and the smallest integer dtype that holds its ids.

* a ``tokenizers.Tokenizer``;
* a transformers *fast* tokenizer (anything with ``backend_tokenizer``);
* a path to a ``tokenizer.json``, a WordPiece ``vocab.txt``, or a directory holding one;
* the name ``"bert-base-uncased"``: the WordPiece vocabulary bundled in ``stoker/text/data``
  (see ``data/NOTICE``), so it works with no network.

:meth:`TextTokenizer.encode` tokenizes a whole batch in one ``encode_batch_fast`` call (the Rust
tokenizer releases the GIL) and returns flat ids with offsets, ready for one padding pass. Long
lines are tokenized from a prefix with the same ids (:mod:`stoker.text.long_lines`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from stoker.errors import ConfigError
from stoker.store.columns import Ragged
from stoker.text.long_lines import LongLineWarning, check_whole, cut_bound, encode_cut, longest_entry

BUNDLED = {"bert-base-uncased": "bert-base-uncased-vocab.txt"}
BUNDLED_LONGEST = {"bert-base-uncased": 18}  # longest_entry() of each bundled file, not read again at each start
_PAD_NAMES = ("[PAD]", "<pad>", "<|padding|>")


def _tokenizers() -> Any:
    try:
        import tokenizers
    except ImportError as exc:  # pragma: no cover - the text extra installs it
        raise ConfigError(
            "stoker.text needs the 'tokenizers' package: pip install 'stoker[text]'", option="tokenizer"
        ) from exc
    return tokenizers


def check_max_length(max_length: Any) -> None:
    """Refuse a ``max_length`` that is neither None nor an integer >= 2."""
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 2):
        raise ConfigError(
            f"max_length must be an integer >= 2 (room for [CLS] and [SEP]) or None, got {max_length!r}",
            option="max_length",
        )


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
            the same ids (:mod:`~stoker.text.long_lines`); ``None``: every text is tokenized whole.
    """

    tokenizer: Any
    pad_id: int
    name: str
    max_length: int | None = None
    cut_at: int | None = None
    _warned: list[bool] = field(default_factory=lambda: [False], repr=False, compare=False)

    @property
    def vocab_size(self) -> int:
        return int(self.tokenizer.get_vocab_size(with_added_tokens=True))

    @property
    def id_dtype(self) -> np.dtype:
        """The smallest integer dtype holding every id (uint16 for BERT's 30,522)."""
        return smallest_uint(max(self.vocab_size, self.pad_id + 1))

    def encode(self, texts: list[str], pairs: list[str] | None = None) -> Encoded:
        """Tokenize a batch in one call; ids come back flat (``Ragged``) in :attr:`id_dtype`."""
        if self.cut_at is None and self.max_length is None:
            check_whole(texts, pairs)
        encs, cut = encode_cut(self.tokenizer, self.cut_at, texts, pairs)
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
    check_max_length(max_length)
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


def _from_name_or_path(spec: str | os.PathLike[str], lowercase: bool) -> tuple[Any, str, int | None]:
    """The tokenizer named or found at ``spec``, its name, and (for a ``vocab.txt``) its longest entry."""
    tk = _tokenizers()
    if isinstance(spec, str) and spec in BUNDLED:
        path = Path(__file__).with_name("data") / BUNDLED[spec]  # installed as files (package data)
        return wordpiece_from_vocab(path, lowercase=True), spec, BUNDLED_LONGEST[spec]
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


__all__ = [
    "BUNDLED",
    "Encoded",
    "LongLineWarning",
    "TextTokenizer",
    "check_max_length",
    "resolve",
    "smallest_uint",
    "wordpiece_from_vocab",
]
