"""``stoker.text.Loader``: BERT-ready batches from raw text or a text store.

Not a loader of its own: a function that composes. It builds the text batch source
(:class:`~stoker.text.source.TextSource`, or a packed one) and, when bucketing or packing, the
batch sampler (:class:`~stoker.text.LengthBuckets`, :class:`~stoker.text.PackedBatches`), and
returns a :class:`stoker.Loader` over both, as vision and every other source compose. Without
bucketing or packing it passes ``batch_size``, ``shuffle`` and ``drop_last`` on, and the core loader
makes its own batches (``shuffle="block"`` with its ``block_size`` and ``window`` included).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, fields
from typing import Any

from stoker.config import LoaderConfig
from stoker.errors import ConfigError
from stoker.loader import Loader as CoreLoader
from stoker.pipeline.ranks import distributed_rank
from stoker.pipeline.sampler import BatchSampler, order_name
from stoker.text.bucketing import LengthBuckets
from stoker.text.from_store import UNSET
from stoker.text.inputs import AUTO, TextColumns
from stoker.text.packing import PackedBatches, PackedText
from stoker.text.progress import check_progress
from stoker.text.source import DEFAULT_MAX_LENGTH, DEFAULT_PAD_MULTIPLE, TextSource, packed_source
from stoker.text.tokenizer import check_max_length

# core options that only apply to a store's own columns: a text source decides its columns and padding
STORE_ONLY = frozenset({"columns", "pad_value"})
# core options that only shape the core's own batches (shuffle="block"); bucketing and packing order rows themselves
BLOCK_ORDER = ("block_size", "window")


@dataclass(frozen=True)
class TextConfig:
    """The text options of :class:`Loader` (the others are :class:`stoker.LoaderConfig`'s).

    Attributes:
        max_length: longest example in tokens, special tokens included; longer ones are cut
            (keeping [CLS]/[SEP]) and counted. Not given (``UNSET``): 512 on the fly, the store's
            own for a store (a smaller one cuts a store's rows further, a larger one is refused).
            With ``packing``: the block length (512 when not given).
        bucketing: group similar lengths. ``"auto"`` (the default): on when shuffling, off with
            ``shuffle=False``, which keeps the input order (predictions line up with the input; the
            report says bucketing is off). ``True`` with ``shuffle=False`` gives a fixed,
            padding-efficient order: windows sorted by length, batches in window order.
            ``drop_last``, ``block_size`` and ``window`` shape the core loader's plain batches and
            are refused with bucketing.
        max_tokens: a token budget per batch instead of a fixed row count (implies bucketing).
        bucket_window: batches whose rows are sorted by length together when bucketing (larger:
            less padding, less mixing).
        packing: concatenate documents into blocks of ``max_length`` tokens, no padding.
        token_type_ids: also return ``token_type_ids`` (always for sentence pairs).
        pad_id: override the tokenizer's pad id.
        inputs: which fields hold texts, pairs and labels, the label map, empty lines and invalid
            UTF-8 (:class:`~stoker.text.TextColumns`); built by :meth:`of` from the keywords
            ``text_column``, ``pair_column``, ``label_column`` (``"auto"`` reads ``label`` when
            there is one), ``keep_empty``, ``encoding_errors``, ``label_names`` and ``class_to_idx``.
        progress: the on-the-fly tokenizer pass that bucketing needs (in a background thread during
            the first epoch; at construction with ``max_tokens``): ``None`` a bar when stderr is a
            terminal, ``True``/``False`` always/never, or a callable given the rows done.
    """

    max_length: Any = UNSET
    bucketing: bool | str = AUTO
    max_tokens: int | None = None
    bucket_window: int = 100
    packing: bool = False
    token_type_ids: bool = False
    pad_id: int | None = None
    inputs: TextColumns = TextColumns()
    progress: Any = None

    def __post_init__(self) -> None:
        if self.max_length is not UNSET:
            check_max_length(self.max_length)
        check_progress(self.progress)
        if self.bucketing not in (True, False, AUTO):
            raise ConfigError(f"bucketing must be True, False or 'auto', not {self.bucketing!r}", option="bucketing")
        if self.packing and self.max_length is None:
            raise ConfigError("packing=True needs max_length: it is the block length", option="max_length")
        if self.packing and (self.max_tokens is not None or self.bucketing is True):
            raise ConfigError("packing makes full blocks: it takes neither max_tokens nor bucketing", option="packing")
        if self.max_tokens is not None and isinstance(self.max_length, int) and self.max_tokens < self.max_length:
            raise ConfigError(
                f"max_tokens={self.max_tokens} is below max_length={self.max_length}: "
                "a long example would not fit a batch",
                option="max_tokens",
            )

    @classmethod
    def of(cls, **options: Any) -> TextConfig:
        """From the user-facing keywords: the input ones (:data:`INPUT_KEYWORDS`) become :attr:`inputs`."""
        given = {k: options.pop(k) for k in INPUT_KEYWORDS if k in options}
        return cls(**options, inputs=TextColumns.of(**given))

    @property
    def block_length(self) -> int:
        """Tokens per packed block: ``max_length`` (512 when not given; None is refused with packing)."""
        return DEFAULT_MAX_LENGTH if self.max_length is UNSET else int(self.max_length)

    def buckets(self, shuffle: bool | str) -> bool:
        """Whether batches are length-bucketed for this ``shuffle`` (``"auto"``: when shuffling)."""
        if self.packing:
            return False
        if self.max_tokens is not None or self.bucketing is True:
            return True
        return self.bucketing == AUTO and order_name(shuffle) != "sequential"

    @classmethod
    def names(cls) -> set[str]:
        """The keywords :meth:`of` takes."""
        return ({f.name for f in fields(cls)} - {"inputs"}) | set(INPUT_KEYWORDS)


# the keywords that make TextConfig.inputs (TextColumns.of's parameters)
INPUT_KEYWORDS = tuple(p for p in inspect.signature(TextColumns.of).parameters if p != "cls")


def loader_options() -> set[str]:
    """The core loader's options that a text loader passes on."""
    return (LoaderConfig.names() - STORE_ONLY) | {"collate_fn"}


def build(
    data: Any, tokenizer: Any, cfg: TextConfig, batch_size: int | None, shuffle: bool | str, options: dict[str, Any]
) -> tuple[TextSource | PackedText, BatchSampler | None]:
    """The text source for ``data`` and its batch sampler, or None where the core loader's plain
    batches (batch_size, shuffle, drop_last) fit. ``options`` are the core loader's (seed, ranks,
    ``pad_to_multiple_of``: None for the text source's own, :data:`DEFAULT_PAD_MULTIPLE`)."""
    seed = options.get("seed", LoaderConfig.seed)
    shuffled = order_name(shuffle) != "sequential"
    rank, world = distributed_rank(options.get("rank"), options.get("world_size"))
    if cfg.packing:
        packed = packed_source(data, tokenizer, cfg.block_length, shuffled, seed, cfg.pad_id, cfg.inputs)
        drop_last = options.get("drop_last", LoaderConfig.drop_last)
        size = 1 if batch_size is None else batch_size
        uneven = options.get("uneven", "drop")  # packing leaves the last blocks out unless told to pad
        sampler = PackedBatches(packed.lengths, cfg.block_length, size, shuffled, seed, rank, world, drop_last, uneven)
        return packed, sampler
    multiple = options.get("pad_to_multiple_of") or DEFAULT_PAD_MULTIPLE
    source = TextSource(
        data,
        tokenizer,
        cfg.max_length,
        pad_to_multiple_of=multiple,
        token_type_ids=cfg.token_type_ids,
        pad_id=cfg.pad_id,
        columns=cfg.inputs,
        progress=cfg.progress,
    )
    if not cfg.buckets(shuffle):
        why = "shuffle=False keeps the input order" if cfg.bucketing == AUTO else "bucketing=False"
        source.tally.bucketing = f"off ({why}; bucketing=True sorts by length)"
        return source, None
    source.tally.bucketing = "on"
    uneven = options.get("uneven", LoaderConfig.uneven)
    lengths: Any = source.streamed_lengths()  # a fixed batch_size streams: the first batches come early
    if cfg.max_tokens is not None:  # budget cuts need every length: the corpus is tokenized now (ids kept)
        lengths = source.lengths()
        longest = -(-int(lengths.max(initial=0)) // multiple) * multiple
        if longest > cfg.max_tokens:
            raise ConfigError(
                f"max_tokens={cfg.max_tokens} is below the longest example ({longest} tokens, padded to a multiple "
                f"of {multiple}): it would not fit a batch; raise max_tokens or pass a smaller max_length",
                option="max_tokens",
            )
    buckets = LengthBuckets(
        lengths, batch_size, cfg.max_tokens, shuffled, seed, cfg.bucket_window, rank, world, uneven, round_to=multiple
    )
    return source, buckets


def Loader(  # noqa: N802 - named as the loader it builds, as users call it
    source: Any,
    tokenizer: Any = UNSET,
    batch_size: int | None = 32,
    max_length: Any = UNSET,
    shuffle: bool | str = False,
    **options: Any,
) -> CoreLoader:
    """A :class:`stoker.Loader` of token-id batches from texts (tokenized on the fly) or a text store.

    Args:
        source: a list of strings, of ``(text, text_b)`` pairs or of ``(text, label)`` rows
            (numeric labels), a dict of columns (``{"text": [...], "label": [...]}``), a path to
            a .txt (one example per line), .jsonl, .csv or .tsv file, or a store written by
            ``stoker.convert.text`` (or its path).
        tokenizer: a name (``"bert-base-uncased"``, bundled, the default), a path to
            tokenizer.json or vocab.txt, a ``tokenizers.Tokenizer`` or a transformers fast
            tokenizer. For a store leave it out; another tokenizer than the store's is refused.
        batch_size, shuffle: as in ``torch.utils.data.DataLoader`` (with ``max_tokens``,
            ``batch_size`` caps the rows of a batch; pass ``None`` for no cap).
        max_length: see :class:`TextConfig`.
        **options: the other keywords of :class:`TextConfig` and the fields of
            :class:`stoker.LoaderConfig` (``pad_to_multiple_of`` defaults to 8 for text).
            ``block_size``, ``window`` and ``drop_last=True`` shape the core loader's plain
            batches: they are refused with bucketing (which keeps every row).

    Returns the core loader over a :class:`~stoker.text.TextSource` (``loader.source``; packed:
    a ``PackedText``) and, when bucketing or packing, a :class:`~stoker.text.LengthBuckets` or
    :class:`~stoker.text.PackedBatches` (``loader.batch_sampler``). Batches are dicts of tensors:
    ``input_ids``, ``attention_mask`` (int64), ``token_type_ids`` when asked or for pairs,
    ``labels`` when the source has them (``loader.label_names``); packed: ``input_ids`` and
    ``position_ids``. ``loader.report()`` counts tokens, padding and truncation. On the fly each
    row is tokenized once and its ids kept (spilled to a temporary file past
    ``STOKER_TEXT_CACHE_MEMORY`` bytes); ``loader.close()`` ends the background tokenization.
    """
    text_opts = {k: options.pop(k) for k in list(options) if k in TextConfig.names()}
    unknown = set(options) - loader_options()
    if unknown:
        raise ConfigError(
            f"unknown option(s) {sorted(unknown)}; text options are {sorted(TextConfig.names())}, "
            f"loader options {sorted(loader_options())}",
            option=sorted(unknown)[0],
        )
    cfg = TextConfig.of(max_length=max_length, **text_opts)
    given = [name for name in BLOCK_ORDER if name in options]
    if given and (cfg.packing or cfg.buckets(shuffle)):
        raise ConfigError(
            f"{given[0]} shapes shuffle='block' without bucketing; with bucketing or packing the text sampler "
            "orders the rows (the bucketing window is bucket_window)",
            option=given[0],
        )
    if batch_size is None and cfg.max_tokens is None and not cfg.packing:
        raise ConfigError(
            "batch_size=None needs max_tokens (a token budget decides the batch sizes)", option="batch_size"
        )
    if options.get("drop_last") and cfg.buckets(shuffle):
        raise ConfigError(
            "drop_last=True does not apply with length bucketing: its batches vary in size and every row is "
            "kept; pass bucketing=False for fixed batches with drop_last",
            option="drop_last",
        )
    if options.get("pad_to_multiple_of") is not None:
        LoaderConfig(pad_to_multiple_of=options["pad_to_multiple_of"])  # checked as the core option is
    data, sampler = build(source, tokenizer, cfg, batch_size, shuffle, options)
    options.pop("pad_to_multiple_of", None)  # the text source's; the core applies it to stores only
    try:
        if sampler is None:
            return CoreLoader(data, 1 if batch_size is None else batch_size, shuffle=shuffle, **options)
        options.pop("drop_last", None)  # the packed sampler took it
        return CoreLoader(data, batch_sampler=sampler, **options)
    except BaseException:
        close = getattr(data, "close", None)
        if close is not None:
            close()  # a refused option must not leave the background tokenization running
        raise


__all__ = ["DEFAULT_MAX_LENGTH", "Loader", "TextConfig", "build"]
