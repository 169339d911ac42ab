"""A local store rewritten (``overwrite=True``, same size) while it is read: the reader gets the rows of
the version it opened, or a ShardError saying the store was rewritten, never rows of both (issue 36 item 2).

Shards keep fixed names and a writer swaps a whole new directory into the store's path, so a reader
that maps a shard after the swap would read the new version's file with the old manifest. The
rewrites here happen between two reads, in this process or another one; with
``STOKER_MAX_MAPPED_SHARDS=1`` every shard read is a fresh mapping.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import stoker
from stoker.errors import ShardError
from stoker.store import reader

pytestmark = pytest.mark.faults

ROWS = 64
PER_SHARD = 8  # rows per shard: 8 shards of 8 rows of 4 int64
NEW = 1_000_000  # the new version's rows are the old ones plus this
LOADER_ROWS = 256  # at most 2 workers x 2 chunks x 1 batch of 4 rows read ahead: most of the pass is read after


def _write(path, version: int, overwrite: bool = False, rows: int = ROWS) -> None:
    x = np.arange(rows * 4, dtype=np.int64).reshape(rows, 4) + version * NEW
    stoker.write(path, {"x": x}, shard_size=PER_SHARD * 4 * 8, overwrite=overwrite)


def _rewrite_elsewhere(path, rows: int = ROWS) -> None:
    """The new version written by another process."""
    code = f"import sys; sys.path[:0] = {sys.path!r}\n" + textwrap.dedent(
        f"""
        import numpy as np, stoker
        x = np.arange({rows * 4}, dtype=np.int64).reshape({rows}, 4) + {NEW}
        stoker.write({str(path)!r}, {{"x": x}}, shard_size={PER_SHARD * 4 * 8}, overwrite=True)
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("STOKER_MAX_MAPPED_SHARDS", "1")  # every shard read maps it again
    path = tmp_path / "store"
    _write(path, 0)
    return path


def _shard_sizes(path) -> list[int]:
    return [s.bytes for s in stoker.open(path).manifest.shards]


def _is_rewrite(exc: BaseException | None) -> bool:
    return isinstance(exc, ShardError) and "was rewritten" in str(exc) and "open the store again" in str(exc)


def _read_until_error(batches, seen: list) -> ShardError | None:
    """Append what ``batches()`` yields to ``seen`` until it ends (None) or raises a ShardError (returned)."""
    try:
        for batch in batches():
            seen.append(np.asarray(batch))
    except ShardError as exc:
        return exc
    return None


@pytest.mark.parametrize("writer", ["this process", "another process"])
def test_a_rewrite_between_reads_is_an_error_never_rows_of_both_versions(store, writer):
    sizes = _shard_sizes(store)
    ds = stoker.open(store)
    seen = [ds[0:PER_SHARD]["x"], ds[PER_SHARD : 2 * PER_SHARD]["x"]]  # two shards read, one mapped
    if writer == "this process":
        _write(store, 1, overwrite=True)
    else:
        _rewrite_elsewhere(store)
    assert _shard_sizes(store) == sizes  # the same names and sizes: only the contents tell them apart
    starts = range(2 * PER_SHARD, ROWS, PER_SHARD)  # shards 2, 3, ...: each mapped after the rewrite
    error = _read_until_error(lambda: (ds[start : start + PER_SHARD]["x"] for start in starts), seen)
    assert all((rows < NEW).all() for rows in seen)  # the old code read the new version's rows from shard 2 on
    assert _is_rewrite(error), error
    assert str(store) in str(error)
    assert (stoker.open(store)[0:ROWS]["x"] >= NEW).all()  # opened again: the new version, whole


def test_shards_mapped_before_a_rewrite_are_read_from_the_version_opened(tmp_path):
    path = tmp_path / "store"
    _write(path, 0)
    ds = stoker.open(path)
    before = ds[0:ROWS]["x"].copy()  # every shard mapped (the default cap is far above 8)
    _write(path, 1, overwrite=True)
    np.testing.assert_array_equal(ds[0:ROWS]["x"], before)
    np.testing.assert_array_equal(ds[ROWS - 1 :: -1]["x"], before[::-1])


@pytest.mark.parametrize("engine", ["threads", "processes"])
def test_a_loader_pass_over_a_store_rewritten_mid_epoch_yields_only_the_old_rows(
    tmp_path, monkeypatch, engine, shm_clean
):
    monkeypatch.setenv("STOKER_MAX_MAPPED_SHARDS", "1")
    path = tmp_path / "store"
    _write(path, 0, rows=LOADER_ROWS)
    loader = stoker.Loader(
        stoker.open(path), batch_size=PER_SHARD // 2, num_workers=2, engine=engine, chunk_size=1, prefetch_factor=2
    )

    def batches():
        for n, batch in enumerate(loader):
            yield batch["x"]
            if n == 2:
                _rewrite_elsewhere(path, LOADER_ROWS)

    rows: list[np.ndarray] = []
    error = _read_until_error(batches, rows)
    assert len(rows) > 3 and all((r < NEW).all() for r in rows)  # the old code mixed in the new version's rows
    assert _is_rewrite(error), error  # the rest of the pass cannot be read from the version opened


def test_a_store_sent_to_another_process_after_a_rewrite_refuses_to_mix(store):
    ds = stoker.open(store)
    view = ds.select([5, 40, 3])
    whole, part = pickle.dumps(ds), pickle.dumps(view)
    np.testing.assert_array_equal(pickle.loads(part)[0:3]["x"][:, 0], [20, 160, 12])  # same version: rows read
    _write(store, 1, overwrite=True)
    for sent in (whole, part):
        with pytest.raises(ShardError) as caught:
            pickle.loads(sent)
        assert _is_rewrite(caught.value) and "another process" in str(caught.value)


def test_verify_and_table_after_a_rewrite_say_so(store):
    ds = stoker.open(store)
    ds[0:1]  # shard 0 mapped
    _write(store, 1, overwrite=True)
    for read in (ds.verify, ds.table):
        with pytest.raises(ShardError) as caught:
            read()
        assert _is_rewrite(caught.value), caught.value


def test_a_store_rewritten_while_it_is_opened_is_opened_again_whole(store, monkeypatch):
    real = reader.check_shard_file
    rewrites = []

    def rewrite_once(directory, info):  # the manifest is read: the store is rewritten before its shards are seen
        if not rewrites:
            rewrites.append(info.file)
            _write(store, 1, overwrite=True)
        return real(directory, info)

    monkeypatch.setattr(reader, "check_shard_file", rewrite_once)
    ds = stoker.open(store)
    assert rewrites == ["shard-00000.arrow"]
    ds.verify()  # the old code kept the first manifest: the new shards failed their checksums
    assert (ds[0:ROWS]["x"] >= NEW).all()
