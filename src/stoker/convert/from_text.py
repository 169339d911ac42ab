"""A text source tokenized once into a store (``stoker.convert.text``, ``stoker convert text``).

The source is read as a stream of blocks; worker threads tokenize blocks in parallel (the
Rust tokenizer releases the GIL) while the main thread writes them in order. The store holds:

* ``input_ids``: a sequence column in the smallest integer dtype for the vocabulary;
* ``length`` (tokens per example), ``truncated`` (1 where ``max_length`` cut the example);
* ``token_type_ids`` for sentence pairs, ``labels`` when the source has labels (the name the
  text loader's batches use);
* ``line``: where the example is in the source (the file's 1-based line, or the 0-based row of
  a list or dict); the text loader does not read it, ``TextSource.describe(row)`` does;

and, in its metadata under ``"stoker.text"``, the tokenizer (name, fingerprint, ``max_length``,
special tokens around a text), pad id, label names, the source and the counts of empty lines
skipped, lines with replaced UTF-8 and long lines tokenized from a prefix (``cut_lines``: their
ids are the whole line's cut to ``max_length``; see ``stoker.text.tokenizer``).

Label names get ids in sorted order, or from the map given (``label_names``), the same in every
file: for names the source is read once before tokenizing to collect them.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path
from typing import Any, cast

import numpy as np

from stoker.convert.inputs import is_url, staged
from stoker.convert.options import ConvertOptions, ConvertResult
from stoker.errors import ConfigError, EmptyDatasetError
from stoker.pipeline.schedule import usable_cores
from stoker.pipeline.threads import ordered_map
from stoker.store.format import Scalar, Sequence
from stoker.text.batches import METADATA_KEY
from stoker.text.inputs import TextBlock, TextColumns, describe_source, iter_blocks, row_unit, scan_labels
from stoker.text.tokenizer import Encoded, resolve, smallest_uint


def convert(
    source: Any,
    store: str | os.PathLike[str],
    tokenizer: Any,
    max_length: int | None,
    columns: TextColumns,
    options: ConvertOptions,
    *,
    line_offset: int = 0,
    source_name: str | None = None,
) -> ConvertResult:
    """Tokenize ``source`` into a new store at ``store``.

    ``columns`` says which fields hold text, pairs and labels and what to do with empty lines
    and invalid UTF-8 (see :class:`~stoker.text.inputs.TextColumns`). ``options.workers``:
    tokenizing threads (default: the usable cores; 0: this thread); ``options.progress`` counts
    examples written. The result's ``skipped`` counts empty lines left out; its ``report`` is
    what the manifest's metadata holds under ``"stoker.text"``. ``line_offset`` is added to every
    ``line`` value (a partition of a larger file numbers its lines as the whole file does);
    ``source_name`` names the source in messages and the metadata (a URL staged into a local file).
    ``source`` may be an object-store URL of text objects (``convert/inputs.py``: read into one local file).
    """
    if is_url(source):
        with staged(source, store, options, images=False) as (local, writer_options):
            return convert(local, store, tokenizer, max_length, columns, writer_options, source_name=str(source))
    tok = resolve(tokenizer, max_length=max_length)
    workers = usable_cores() if options.workers is None else options.workers
    coder = scan_labels(source, columns)
    where, unit = source_name or describe_source(source), row_unit(source)
    skipped = replaced = cut_lines = 0
    id_dtype = tok.id_dtype
    len_dtype = smallest_uint((max_length or 2**31) + 1)

    def encode(block: TextBlock) -> tuple[TextBlock, Encoded]:
        return block, tok.encode(block.texts, block.pairs)

    schema = {
        "input_ids": Sequence(id_dtype),
        "length": Scalar(len_dtype),
        "truncated": Scalar(np.uint8),
        "line": Scalar(np.int64),
    }
    writer = options.writer(store, None, {})
    with writer, options.bar(None, "tokenizing") as bar:
        blocks = cast(
            Generator[tuple[TextBlock, Encoded], None, None],
            ordered_map(
                encode, iter_blocks(source, columns), workers=workers, depth=2 * max(workers, 1), stage="tokenize"
            ),
        )
        try:
            for block, enc in blocks:
                skipped += block.skipped_empty
                cut_lines += 0 if enc.cut is None else int(enc.cut.sum())
                replaced += block.replaced_lines
                if not block.texts:
                    continue
                lengths = enc.ids.lengths
                data: dict[str, Any] = {
                    "input_ids": enc.ids,
                    "length": lengths.astype(len_dtype),
                    "truncated": np.zeros(len(lengths), np.uint8)
                    if enc.truncated is None
                    else enc.truncated.astype(np.uint8),
                    "line": np.asarray(block.lines, dtype=np.int64) + line_offset,
                }
                full = dict(schema)
                if enc.type_ids is not None:
                    data["token_type_ids"] = enc.type_ids
                    full["token_type_ids"] = Sequence(np.uint8)
                if block.labels is not None and coder is not None:
                    data["labels"] = coder.encode(block.labels, block.lines, where, unit)
                    full["labels"] = Scalar(data["labels"].dtype)
                if writer.schema is None:
                    writer.schema = full
                writer.add_batch(data)
                bar.update(len(block.texts))
        finally:
            blocks.close()
        if columns.label_names is not None and "labels" not in (writer.schema or {}):
            raise ConfigError(
                f"label_names/class_to_idx were given but {where} has no labels (label_column={columns.label!r})",
                option="label_names",
            )
        if writer.rows_written == 0:
            raise EmptyDatasetError(
                f"{where} holds no text ({skipped} empty lines skipped; keep_empty=True keeps them)"
            )
        report = {
            **tok.describe(),
            "source": where,
            "id_dtype": str(id_dtype),
            "label_names": list(coder.label_names) if coder is not None and coder.label_names else None,
            "skipped_empty": skipped,
            "replaced_lines": replaced,
            "cut_lines": cut_lines,
        }
        writer.metadata[METADATA_KEY] = report
        rows = writer.rows_written
    return ConvertResult(Path(store), rows, skipped, report=report)
