"""The on-disk format of a stoker store, written down in one place (the names of ``kinds.py`` and
``manifest.py``, which implement it, are importable from here).

A store is a directory::

    manifest.json          what is below, see Manifest
    shard-00000.arrow      Arrow IPC *stream* format, uncompressed, one record batch
    shard-00001.arrow      ...

Each shard holds one record batch, so that every column of a shard is one contiguous
buffer that can be memory-mapped and viewed as a numpy array without a copy.

Column kinds and their Arrow types (all numbers little-endian):

=========  ===========================================  ==========================
kind       numpy side                                   Arrow type
=========  ===========================================  ==========================
tensor     fixed shape ``(*shape)`` of a numeric dtype  ``dtype`` (shape ``()``) or
                                                        ``fixed_size_list<dtype>[prod(shape)]``
sequence   1-D arrays of varying length (token ids)     ``large_list<dtype>``
binary     bytes of any length (encoded images)         ``large_binary``
string     str                                          ``large_string``
=========  ===========================================  ==========================

``bool`` tensors are stored as ``uint8`` (Arrow packs booleans into bits, which cannot be
viewed without a copy); dtypes without an Arrow counterpart (complex, for instance) are
stored as ``fixed_size_binary`` of their bytes. The manifest keeps the numpy dtype either way.

Tensor fields carry their numpy shape and dtype in the Arrow field metadata (``stoker.shape``:
``b"[28, 28]"``, ``stoker.dtype``: ``b"uint8"``), so Arrow readers (pyarrow, polars) get them
without the manifest.

Format versions: 1 recorded each shard's ``sha256``; 2 records each shard's checksum under the
name of its algorithm (``xxh3_128`` for new shards, computed while the shard is written; see
``shardfile.py``); 3 writes shards in the Arrow IPC *stream* format (1 and 2: the IPC *file*
format), the format ``datasets.Dataset.from_file`` memory-maps, with the field metadata above.
4 adds the manifest's own checksum (``"checksum": {"xxh3_128": hex}``, over the canonical JSON of
every other key, see :func:`manifest_checksum`), so that an edited manifest (a shard listed twice, a
shape changed from ``[4]`` to ``[2, 2]``) is refused at open. All are read (the reader tells the two
shard formats apart by the file's first bytes); a manifest of versions 1-3 has no checksum of its own
(one that does is checked all the same); new stores are written as version 4.
"""

from __future__ import annotations

from stoker.store.kinds import (
    DTYPE_KEY,
    KINDS,
    MAX_ROW_ELEMENTS,
    SHAPE_KEY,
    Binary,
    Column,
    Scalar,
    Schema,
    Sequence,
    String,
    Tensor,
    arrow_schema,
)
from stoker.store.manifest import (
    CHECKSUM_KEY,
    CHECKSUMMED_SINCE,
    CHECKSUMS,
    DEFAULT_CHECKSUM,
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST_NAME,
    READABLE_VERSIONS,
    SHARD_PATTERN,
    Manifest,
    ShardInfo,
    _unique_keys,
    manifest_checksum,
)

__all__ = [
    "CHECKSUMMED_SINCE",
    "CHECKSUMS",
    "CHECKSUM_KEY",
    "DEFAULT_CHECKSUM",
    "DTYPE_KEY",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "KINDS",
    "MANIFEST_NAME",
    "MAX_ROW_ELEMENTS",
    "READABLE_VERSIONS",
    "SHAPE_KEY",
    "SHARD_PATTERN",
    "Binary",
    "Column",
    "Manifest",
    "Scalar",
    "Schema",
    "Sequence",
    "ShardInfo",
    "String",
    "Tensor",
    "_unique_keys",
    "arrow_schema",
    "manifest_checksum",
]
