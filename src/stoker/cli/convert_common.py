"""Shared parts of the ``stoker convert KIND`` commands: one flag per shared option, one summary line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from stoker.cli.output import human_bytes
from stoker.errors import ConfigError


def kind_parser(
    kinds: argparse._SubParsersAction, name: str, help: str, doc: str | None, *, raw: bool = False
) -> argparse.ArgumentParser:
    """The parser of one ``stoker convert`` kind, described by its module docstring ``doc``.

    ``raw``: the description is printed as written (for docstrings with example commands, one a line).
    """
    formatter = argparse.RawDescriptionHelpFormatter if raw else argparse.HelpFormatter
    return kinds.add_parser(name, help=help, description=doc, formatter_class=formatter)


def on_error_option(p: argparse.ArgumentParser, help: str) -> None:
    """``--on-error raise|skip`` (default raise): the ``on_error`` of the kinds that can leave a bad input out."""
    p.add_argument("--on-error", choices=("raise", "skip"), default="raise", help=help)


def shared_options(p: argparse.ArgumentParser, workers: str | None) -> None:
    """The flags of :class:`stoker.convert.ConvertOptions`; ``workers`` is the help of ``--workers`` (None: no flag)."""
    p.add_argument("--overwrite", action="store_true", help="replace STORE if it exists")
    p.add_argument("--shard-size", default="256MB", help="bytes of data per shard at most (default 256MB)")
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when it is a terminal)",
    )
    if workers is not None:
        p.add_argument("--workers", type=int, default=None, metavar="N", help=workers)
    p.add_argument(
        "--storage-option",
        dest="storage_options",
        action=StorageOption,
        default=None,
        metavar="KEY=VALUE",
        help="for a SRC or STORE URL (s3://bucket/prefix; text and images read SRC from one): one of fsspec's storage_options, repeatable "
        "(endpoint_url=http://host:9000, client_kwargs.region_name=eu-west-1, anon=true; a VALUE that is "
        "JSON is read as JSON), or a JSON object of them; credentials are best left in the environment "
        "(AWS_ACCESS_KEY_ID, ...), where other users' `ps` cannot see them",
    )


class StorageOption(argparse.Action):
    """``--storage-option KEY=VALUE`` (dotted keys nest, JSON values parsed) or ``--storage-option '{...}'``, merged."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        merged = dict(getattr(namespace, self.dest, None) or {})
        text = str(values)
        try:
            if text.lstrip().startswith("{"):
                parsed = json.loads(text)
                if not isinstance(parsed, dict):
                    raise ValueError("not an object")
                _merge(merged, parsed)
            else:
                key, sep, raw = text.partition("=")
                if not sep or not key.strip():
                    raise ValueError("no KEY=")
                _merge(merged, _nested(key.strip().split("."), _value(raw)))
        except ValueError:
            parser.error(f"{option} {text!r}: give KEY=VALUE (a dotted KEY nests) or a JSON object")
        setattr(namespace, self.dest, merged)


def _value(raw: str) -> Any:
    """``raw`` as JSON (``true``, ``5``, ``{"a": 1}``) when it is JSON, else the string itself."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _nested(keys: Sequence[str], value: Any) -> dict[str, Any]:
    out: Any = value
    for key in reversed(keys):
        if not key:
            raise ValueError("empty key")
        out = {key: out}
    return dict(out)


def _merge(into: dict[str, Any], more: Mapping[str, Any]) -> None:
    for key, value in more.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = dict(value) if isinstance(value, Mapping) else value


def shared(args: argparse.Namespace) -> dict[str, Any]:
    """The shared options as keywords for a ``stoker.convert`` function."""
    out = {"overwrite": args.overwrite, "shard_size": args.shard_size, "progress": args.progress}
    if hasattr(args, "workers"):
        out["workers"] = args.workers
    if getattr(args, "storage_options", None):
        out["storage_options"] = args.storage_options
    return out


def split_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def summary(
    result: Any,
    noun: str = "rows",
    skipped: str = "",
    source_bytes: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Two lines on stdout: what a :class:`stoker.convert.ConvertResult` wrote, then the store's schema.

    ``skipped`` says what the skipped inputs were (printed after their count when there are any);
    ``storage_options`` reach a store written to a URL (its manifest is read back).
    """
    from stoker.store.urls import as_url, is_remote
    from stoker.stores import open as open_store

    ds = open_store(result.path, storage_options=storage_options)
    where = as_url(result.path) if is_remote(result.path) else result.path  # s3://, not pathlib's s3:/
    seconds = result.seconds
    rate = f", {human_bytes(source_bytes / seconds)}/s of input" if source_bytes and seconds > 0 else ""
    took = f"{seconds:.1f} s" if seconds >= 1 else f"{seconds * 1e3:.0f} ms"  # not "0.0 s" for a small input
    skip = f"; {result.skipped:,} skipped{f' ({skipped})' if skipped else ''}" if result.skipped else ""
    print(
        f"wrote {where}: {result.rows:,} {noun}, {ds.num_shards} shard{'' if ds.num_shards == 1 else 's'}, "
        f"{human_bytes(ds.nbytes)} in {took}{rate}{skip}"
    )
    print(f"  {ds}")


def warn(message: str) -> None:
    print(f"stoker: {message}", file=sys.stderr)


def label_names_options(p: argparse.ArgumentParser, what: str, store_kind: str) -> None:
    """``--label-names`` / ``--label-names-from``: one map for train and val (``what``: "label names"
    or "class names"; ``store_kind``: the store the names are read from)."""
    names = p.add_mutually_exclusive_group()
    names.add_argument(
        "--label-names",
        default=None,
        metavar="A,B,...",
        help=f"{what} in id order, to give train and val one map (default: the names found, sorted): "
        'comma-separated, or a JSON list for names holding commas (\'["Chandler, Joey", "Monica"]\')',
    )
    names.add_argument(
        "--label-names-from",
        default=None,
        metavar="STORE",
        help=f"the {what} of an existing {store_kind} (the train split's), so that this split gets its map",
    )


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
    """The label names (id order) that the store at ``path`` was written with: a text store's
    ``label_names``, an image store's ``classes``; ConfigError when it has none."""
    import stoker
    from stoker.store.urls import is_remote

    meta = stoker.open(path, storage_options=storage_options if is_remote(path) else None).metadata
    names = (meta.get("stoker.text") or {}).get("label_names") or meta.get("classes")
    if not names:
        raise ConfigError(
            f"--label-names-from {path}: that store has no label names (neither a text store written with "
            "labels nor an image store of class folders); give the train split's store, or --label-names",
            option="label_names_from",
        )
    return [str(name) for name in names]
