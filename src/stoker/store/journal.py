"""The journal of a resumable write: which shards a staging directory holds, for what input.

``StoreWriter(staging=DIR)`` writes ``DIR/journal.json`` atomically after every finished
shard; a writer opened later on the same ``DIR`` reads it back with :func:`read_journal`,
which checks that the input (``metadata``) and schema match and that every shard is intact,
and removes a shard left half-written by the run that stopped.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from stoker.errors import ConfigError, SchemaError
from stoker.store.format import Column, ShardInfo

JOURNAL_NAME = "journal.json"


def write_journal(staging: Path, schema: dict[str, Column], shards: list[ShardInfo], metadata: dict[str, Any]) -> None:
    """Record ``shards`` in ``staging``'s journal (written to a part file, synced, then renamed)."""
    obj = {
        "columns": {name: col.to_json() for name, col in schema.items()},
        "shards": [s.to_json() for s in shards],
        "metadata": metadata,
    }
    part = staging / (JOURNAL_NAME + ".part")
    with open(part, "w", encoding="utf-8") as f:
        json.dump(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, staging / JOURNAL_NAME)


def read_journal(
    staging: Path, metadata: dict[str, Any], schema: dict[str, Column] | None
) -> tuple[dict[str, Column], list[ShardInfo]]:
    """The schema and finished shards a staging directory holds for this input; raises if it holds other input."""
    journal = staging / JOURNAL_NAME
    try:
        obj = json.loads(journal.read_text(encoding="utf-8"))
        stored = {str(k): Column.from_json(v) for k, v in obj["columns"].items()}
        shards = [ShardInfo.from_json(s) for s in obj["shards"]]
        started_with = obj["metadata"]
    except (OSError, ValueError, KeyError, TypeError, SchemaError) as exc:
        raise ConfigError(f"{journal} is unreadable ({exc}); delete {staging} to start over", option="staging") from exc
    if started_with != metadata:
        raise ConfigError(
            f"{staging} holds a partial write of other input (its metadata {started_with!r:.200} differs "
            f"from {metadata!r:.200}); delete it to start over",
            option="staging",
        )
    if schema is not None and schema != stored:
        raise SchemaError(
            f"{staging} was started with schema {stored}, this writer declares {schema}; delete it to start over"
        )
    for info in shards:
        shard = staging / info.file
        if not shard.is_file() or shard.stat().st_size != info.bytes:
            raise ConfigError(f"{shard} is missing or altered; delete {staging} to start over", option="staging")
    known = {info.file for info in shards} | {JOURNAL_NAME}
    for leftover in staging.iterdir():  # a shard being written when the last run stopped
        if leftover.name not in known and re.fullmatch(r"shard-\d+\.arrow(\.part)?", leftover.name):
            leftover.unlink()
    return stored, shards
