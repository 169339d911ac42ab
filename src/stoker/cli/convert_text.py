"""``stoker convert text SRC STORE``: tokenize text once into a store.

SRC is a .txt file (one example per line), .jsonl, .csv or .tsv (with a header row).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from stoker.cli.convert_common import kind_parser, shared, shared_options, split_list, summary
from stoker.errors import ConfigError
from stoker.store.location import is_remote


def register(sub: argparse._SubParsersAction) -> None:
    p = kind_parser(sub, "text", "tokenize a text file into a store", __doc__)
    p.add_argument("src", help="the text file: .txt, .jsonl, .csv or .tsv")
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
    names = p.add_mutually_exclusive_group()
    names.add_argument(
        "--label-names",
        default=None,
        metavar="A,B,...",
        help="label names in id order, to give train and val one map (default: the names found, sorted): "
        'comma-separated, or a JSON list for names holding commas (\'["Chandler, Joey", "Monica"]\')',
    )
    names.add_argument(
        "--label-names-from",
        default=None,
        metavar="STORE",
        help="the label names of an existing text store (the train split's), so that this split gets its map",
    )
    p.add_argument("--keep-empty", action="store_true", help="keep empty lines (default: skip and count them)")
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
    from stoker.store.reader import Store

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
    ds = Store(result.path)
    truncated = int(ds.gather(np.arange(len(ds)), ["truncated"])["truncated"].sum())
    info = result.report
    print(
        f"  tokenizer {info.get('name')}, ids {info.get('id_dtype')}, {truncated:,} truncated to {args.max_length}, "
        f"{info.get('skipped_empty', 0):,} empty lines skipped"
    )
    if info.get("label_names"):  # a JSON list: names may hold commas
        print(f"  labels (id order): {json.dumps(list(info['label_names']), ensure_ascii=False)}")
    return 0


def label_names(args: argparse.Namespace) -> list[str] | None:
    """The label names asked for: ``--label-names`` (comma-separated or a JSON list) or those of ``--label-names-from``."""
    if args.label_names_from is not None:
        return names_of_store(args.label_names_from, args.storage_options)
    text = args.label_names
    if text is None or not text.lstrip().startswith("["):
        return split_list(text)
    try:
        names = json.loads(text)
    except ValueError as exc:
        raise ConfigError(
            f"--label-names {text!r} starts with '[' but is not a JSON list ({exc}); give "
            '\'["name, with comma", "other"]\' or A,B,C',
            option="label_names",
        ) from None
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise ConfigError(f"--label-names {text!r}: a JSON list of strings is expected", option="label_names")
    return names


def names_of_store(path: str, storage_options: Mapping[str, Any] | None) -> list[str]:
    """The label names (id order) that the text store at ``path`` was written with; ConfigError when it has none."""
    import stoker

    from_store = stoker.open(path, storage_options=storage_options if is_remote(path) else None)
    names = (from_store.metadata.get("stoker.text") or {}).get("label_names")
    if not names:
        raise ConfigError(
            f"--label-names-from {path}: that store has no label names (it is not a text store written with "
            "labels); give the train split's text store, or --label-names",
            option="label_names_from",
        )
    return [str(name) for name in names]
