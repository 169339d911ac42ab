"""The stoker store: Arrow IPC shards plus a JSON manifest. numpy + pyarrow (+ xxhash) only.

Files:
    format.py   column kinds, manifest, format version (the on-disk contract)
    columns.py  schema inference and validation, Ragged (flat values + offsets)
    writer.py   StoreWriter / write(): streaming, sharded by size, atomic rename
    shardfile.py  one shard file written with its checksum computed on the way; file checksums
    reader.py   Store / open(): memory-mapped shards and batch gathers
    interop.py  export() to Arrow IPC files / Parquet, shaped() and tensor() for other Arrow tools
    provider.py ShardProvider: the seam a store kept elsewhere (stoker.remote) is read through

Local directories only: ``stoker.open`` / ``stoker.write`` / ``stoker.StoreWriter`` take URLs too.
"""

from stoker.store.columns import Ragged
from stoker.store.format import FORMAT_VERSION, Binary, Column, Manifest, Scalar, Sequence, String, Tensor
from stoker.store.reader import Store, open
from stoker.store.writer import StoreWriter, write

__all__ = [
    "FORMAT_VERSION",
    "Binary",
    "Column",
    "Manifest",
    "Ragged",
    "Scalar",
    "Sequence",
    "Store",
    "StoreWriter",
    "String",
    "Tensor",
    "open",
    "write",
]
