"""A re-signed manifest that declares more rows than its shards can hold is refused at open (issue 36 item 9)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import stoker
from stoker.errors import StokerError
from stoker.store.format import CHECKSUM_KEY, manifest_checksum

pytestmark = pytest.mark.faults


def test_rows_beyond_the_shards_bytes_are_refused_before_any_allocation(tmp_path):
    path = stoker.write(tmp_path / "s", {"x": np.arange(100, dtype=np.int64)})
    manifest = path / "manifest.json"
    obj = json.loads(manifest.read_text())
    obj["shards"][0]["rows"] = obj["num_rows"] = 2**62  # the shard's size and checksum still match
    obj[CHECKSUM_KEY] = {"xxh3_128": manifest_checksum(obj)}
    manifest.write_text(json.dumps(obj))
    with pytest.raises(StokerError, match=r"4611686018427387904 rows cannot be held in \d+ bytes") as err:
        stoker.Loader(path, batch_size=8, shuffle=True)  # was numpy's "ValueError: array is too big"
    assert "shard-00000" in str(err.value)


@pytest.mark.parametrize("name", ["s" * 300 + ".arrow", "shard\n.arrow", "shard-\udcff.arrow", "tab\there.arrow"])
def test_shard_names_no_file_system_takes_are_refused_as_a_corrupt_manifest(tmp_path, name):
    """ENAMETOOLONG, obstore's ValueError on a newline, UnicodeEncodeError: raw exceptions before."""
    path = stoker.write(tmp_path / "s", {"x": np.arange(10, dtype=np.int64)})
    manifest = path / "manifest.json"
    obj = json.loads(manifest.read_text())
    obj["shards"][0]["file"] = name
    obj[CHECKSUM_KEY] = {"xxh3_128": manifest_checksum(obj)}
    manifest.write_text(json.dumps(obj))
    with pytest.raises(StokerError, match="not a file name a store writes"):
        stoker.open(path)
