"""``stoker convert text SRC STORE``: tokenize text once into a store.

SRC is a .txt file (one example per line), .jsonl, .csv or .tsv (with a header row).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from stoker.cli.convert_common import kind_parser, label_names, label_names_options, shared, shared_options, summary


def register(sub: argparse._SubParsersAction) -> None:
    p = kind_parser(sub, "text", "tokenize a text file into a store", __doc__)
    p.add_argument("src", help="the text file: .txt, .jsonl, .csv or .tsv; or objects: s3://bucket/corpus/*.txt")
    p.add_argument("store", help="the store directory to write")
    p.add_argument(
        "--tokenizer",
        default="bert-base-uncased",
        help="bundled name, or a path to tokenizer.json / vocab.txt (default bert-base-uncased)",
    )
    p.add_argument("--max-length", type=int, default=512, help="cut longer examples, keeping [CLS]/[SEP] (default 512)")
    p.add_argument("--text-column", default="text", help="column holding the text (default text)")
    p.add_argument("--pair-column", default=None, help="column holding the second text of sentence pairs")
    p.add_argument(
        "--label-column",
        default="auto",
        help="column holding the label ('auto': 'label' when present; 'none': no label)",
    )
    label_names_options(p, "label names", "text store")
    p.add_argument(
        "--keep-empty",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep empty texts as rows, as the text loader does (default); --no-keep-empty skips them with a warning",
    )
    p.add_argument(
        "--encoding-errors",
        choices=("strict", "replace"),
        default="strict",
        help="invalid UTF-8: fail (strict) or replace",
    )
    shared_options(p, workers="tokenizing threads (default: the usable cores; 0: in this thread)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import stoker.convert
    from stoker.stores import open as open_store

    label = None if args.label_column.lower() == "none" else args.label_column
    result = stoker.convert.text(
        args.src,
        args.store,
        args.tokenizer,
        max_length=args.max_length,
        text_column=args.text_column,
        pair_column=args.pair_column,
        label_column=label,
        keep_empty=args.keep_empty,
        encoding_errors=args.encoding_errors,
        label_names=label_names(args),
        **shared(args),
    )
    summary(result, noun="examples", skipped="empty lines", storage_options=args.storage_options)
    ds = open_store(result.path, storage_options=args.storage_options)
    truncated = int(ds.gather(np.arange(len(ds)), ["truncated"])["truncated"].sum())
    info = result.report
    print(
        f"  tokenizer {info.get('name')}, ids {info.get('id_dtype')}, {truncated:,} truncated to {args.max_length}, "
        f"{info.get('skipped_empty', 0):,} empty lines skipped"
    )
    if info.get("label_names"):  # a JSON list: names may hold commas
        print(f"  labels (id order): {json.dumps(list(info['label_names']), ensure_ascii=False)}")
    return 0
