"""Damaged and hostile stores: a StokerError naming the file or field, never a crash or a wrong read (issue 15)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import stoker
from stoker.errors import ManifestError, SchemaError, ShardError


def _edit(store, change, resign=False):
    path = store / "manifest.json"
    m = json.loads(path.read_text())
    change(m)
    if resign:  # a manifest edited by a tool that also rewrote its checksum: the reader's own checks must catch it
        from stoker.store.format import manifest_checksum

        m["checksum"] = {"xxh3_128": manifest_checksum(m)}
    path.write_text(json.dumps(m))


def _small(tmp_path):
    rng = np.random.default_rng(0)
    cols = {
        "image": rng.integers(0, 255, size=(24, 4), dtype=np.uint8),
        "ids": [rng.integers(0, 100, size=int(k), dtype=np.int32) for k in rng.integers(0, 6, size=24)],
        "text": [f"row {i}" for i in range(24)],
    }
    return stoker.write(tmp_path / "small", cols, shard_size=400)


def test_a_flipped_offset_byte_is_a_shard_error_not_an_abort(tmp_path):
    # issue 15 item 1: some single-byte flips aborted the interpreter in arr.flatten(); run each in a child
    store = _small(tmp_path)
    code = (
        "import sys, stoker\n"
        "from stoker.errors import StokerError\n"
        "p = sys.argv[1] + '/shard-00000.arrow'; data = bytearray(open(p, 'rb').read())\n"
        "bad = 0\n"
        "for i in range(len(data)):\n"
        "    for v in (0xFF,):\n"
        "        d = bytearray(data); d[i] ^= v; open(p, 'wb').write(bytes(d))\n"
        "        try:\n"
        "            ds = stoker.open(sys.argv[1]); ds[0:len(ds)]\n"
        "        except StokerError:\n"
        "            pass\n"
        "        except Exception as e:\n"
        "            bad += 1; print(i, v, type(e).__name__, e)\n"
        "print('bad', bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(store)], capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("bad 0"), out.stdout[-2000:]


def test_validation_names_the_shard(tmp_path):
    store = _small(tmp_path)
    shard = store / "shard-00000.arrow"
    data = bytearray(shard.read_bytes())
    # the last 8 bytes of the ids column's offsets lie before its values; make an offset point far out
    m = json.loads((store / "manifest.json").read_text())
    ds = stoker.open(store)
    n = m["shards"][0]["rows"]
    offsets = np.arange(n + 1, dtype=np.int64)
    del ds
    found = bytes(data).find(np.asarray(stoker.open(store)._cache.get(0).columns["ids"].offsets).tobytes())
    assert found >= 0 and offsets.size  # the offsets buffer as it lies in the file
    data[found + 8 * n : found + 8 * n + 8] = np.int64(2**56).tobytes()
    shard.write_bytes(bytes(data))
    with pytest.raises(ShardError, match="shard-00000.arrow"):
        ds = stoker.open(store)
        ds[0 : len(ds)]


def test_a_shard_listed_twice_is_refused(tmp_path):
    store = _small(tmp_path)

    def dup(m):
        m["shards"].insert(0, m["shards"][0])
        m["num_rows"] += m["shards"][0]["rows"]

    _edit(store, dup)
    with pytest.raises(ManifestError, match="twice"):
        stoker.open(store)
    _edit(store, lambda m: None, resign=True)  # re-signed: the duplicate itself is caught
    with pytest.raises(ManifestError, match="twice"):
        stoker.open(store, verify=True)


def test_a_shape_edit_is_refused(tmp_path):
    store = _small(tmp_path)
    _edit(store, lambda m: m["columns"]["image"].update(shape=[2, 2]))
    with pytest.raises(ManifestError, match="own xxh3_128 checksum"):
        stoker.open(store, verify=True)
    _edit(store, lambda m: None, resign=True)  # re-signed: the shard's field metadata still says [4]
    with pytest.raises(ShardError, match="stoker.shape"):
        ds = stoker.open(store, verify=True)
        ds[0]


def test_swapped_shards_fail_the_manifest_checksum(tmp_path):
    store = _small(tmp_path)
    _edit(store, lambda m: m.update(shards=m["shards"][::-1]))
    with pytest.raises(ManifestError, match="own xxh3_128 checksum"):
        stoker.open(store)


def test_old_manifests_without_their_own_checksum_open(tmp_path):
    store = _small(tmp_path)
    _edit(store, lambda m: (m.pop("checksum"), m.update(version=3)))
    ds = stoker.open(store, verify=True)
    assert ds.manifest.version == 3 and len(ds) == 24
    _edit(store, lambda m: m.update(version=4))  # version 4 must carry one
    with pytest.raises(ManifestError, match='no "checksum"'):
        stoker.open(store)


@pytest.mark.parametrize(
    "change,match",
    [
        (lambda m: m["columns"]["image"].update(shape=[2**40]), "values per row"),
        (lambda m: m["columns"]["image"].update(shape="4"), "list of integers"),
        (lambda m: m.update(shards=[], num_rows=0), "0 shards"),
        (lambda m: m["shards"][0].update(rows=-1), "counts"),
        (lambda m: m.update(num_rows=1e400), "malformed"),
        (lambda m: m.update(version=True), "format version True"),
    ],
)
def test_malformed_fields_are_manifest_errors(tmp_path, change, match):
    store = _small(tmp_path)
    _edit(store, change, resign=True)
    with pytest.raises(ManifestError, match=match):
        stoker.open(store)


def test_deep_json_is_a_manifest_error(tmp_path):
    store = _small(tmp_path)
    (store / "manifest.json").write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ManifestError, match="manifest.json.*nested too deeply"):
        stoker.open(store)


def test_a_huge_shape_is_a_schema_error():
    with pytest.raises(SchemaError, match="values per row"):
        stoker.Tensor("uint8", (2**40,))


def test_empty_shard_list_fails_inspect_verify(tmp_path):
    store = _small(tmp_path)
    _edit(store, lambda m: m.update(shards=[], num_rows=0), resign=True)
    out = subprocess.run(
        [sys.executable, "-m", "stoker.cli.main", "inspect", "--verify", str(store)], capture_output=True, text=True
    )
    assert out.returncode != 0 and "verified" not in out.stdout
    assert "Traceback" not in out.stderr and "0 shards" in out.stderr + out.stdout


def test_inspect_verify_checks_checksums_before_parsing(tmp_path):
    store = _small(tmp_path)
    shard = store / "shard-00000.arrow"
    data = bytearray(shard.read_bytes())
    data[: len(data) // 2] = b"\xff" * (len(data) // 2)
    shard.write_bytes(bytes(data))
    out = subprocess.run(
        [sys.executable, "-m", "stoker.cli.main", "inspect", "--verify", str(store)], capture_output=True, text=True
    )
    assert out.returncode == 1 and "altered" in out.stderr + out.stdout


def test_a_symlink_out_of_the_store_is_refused(tmp_path):
    store = _small(tmp_path)
    outside = tmp_path / "elsewhere.arrow"
    os.replace(store / "shard-00000.arrow", outside)
    os.symlink(outside, store / "shard-00000.arrow")
    with pytest.raises(ShardError, match="outside the store directory"):
        stoker.open(store, verify=True)
    with pytest.raises(ShardError, match="outside the store directory"):
        stoker.open(store)


def test_a_symlink_inside_the_store_opens(tmp_path):
    store = _small(tmp_path)
    os.replace(store / "shard-00000.arrow", store / "real.arrow")
    os.symlink("real.arrow", store / "shard-00000.arrow")
    assert len(stoker.open(store, verify=True)[0:24]["text"]) == 24


def _can_mount_tmpfs(path) -> bool:
    if os.geteuid() != 0:
        return False
    return (
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)], capture_output=True).returncode
        == 0
    )


def test_disk_full_names_the_file(tmp_path):
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    if not _can_mount_tmpfs(mnt):
        pytest.skip("needs root to mount a 1 MiB tmpfs (mount -t tmpfs -o size=1m tmpfs DIR)")
    try:
        with pytest.raises(
            stoker.errors.StokerError, match=r"cannot write .*small-disk.*shard-00000.arrow.*No space"
        ) as info:
            stoker.write(mnt / "s", {"x": np.zeros((3000, 1000), np.uint8)})
        assert isinstance(info.value, OSError) and info.value.errno == 28
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                "import numpy as np, stoker; stoker.write('" + str(mnt / "t") + "', "
                "{'x': np.zeros((3000, 1000), np.uint8)})",
            ],
            capture_output=True,
            text=True,
        )
        assert "StoreWriteError" in out.stderr and "small-disk" in out.stderr
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_table_validates_each_shard_like_a_gather(tmp_path):
    # old code: Store.table() concatenated the mapped shards unchecked, handing back offsets far outside the file
    store = _small(tmp_path)
    shard = store / "shard-00000.arrow"
    offsets = np.asarray(stoker.open(store)._cache.get(0).columns["ids"].offsets).tobytes()
    data = bytearray(shard.read_bytes())
    found = bytes(data).find(offsets)
    assert found >= 0
    data[found + len(offsets) - 8 : found + len(offsets)] = np.int64(2**56).tobytes()  # the last offset
    shard.write_bytes(bytes(data))
    ds = stoker.open(store, verify=False)  # shards are mapped on first touch: opening reads none
    with pytest.raises(ShardError, match="shard-00000.arrow"):
        ds.table()
    with pytest.raises(ShardError, match="shard-00000.arrow"):
        ds.select([0, 1]).table()


def test_a_full_disk_under_the_journal_names_the_file(tmp_path):
    # old code: write_journal raised a bare OSError: [Errno 28] with no path
    from stoker.store.journal import write_journal

    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    if not _can_mount_tmpfs(mnt):
        pytest.skip("needs root to mount a 1 MiB tmpfs (mount -t tmpfs -o size=1m tmpfs DIR)")
    try:
        with open(mnt / "filler", "wb") as f, pytest.raises(OSError):  # fill every page of the 1 MiB
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        with pytest.raises(
            stoker.StoreWriteError, match=r"cannot write .*small-disk.*journal\.json\.part.*No space"
        ) as info:
            write_journal(mnt, {}, [], {"input": "x" * 100})
        assert info.value.errno == 28 and info.value.filename == str(mnt / "journal.json.part")
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
