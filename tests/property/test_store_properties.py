"""Writing then reading returns what was written, for every column kind and shard size."""

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import stoker

DTYPES = ["uint8", "int16", "int32", "int64", "uint64", "float16", "float32", "float64", "bool", "complex64"]


@st.composite
def tables(draw):
    n = draw(st.integers(1, 40))
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=4))
    tensor = draw(
        hnp.arrays(
            np.dtype(dtype),
            (n, *shape),
            elements={"allow_nan": False} if dtype.startswith(("float", "complex")) else None,
        )
    )
    seq_dtype = draw(st.sampled_from(["uint16", "int32", "float32"]))
    seqs = [
        draw(
            hnp.arrays(
                np.dtype(seq_dtype),
                draw(st.integers(0, 6)),
                elements={"allow_nan": False} if seq_dtype == "float32" else None,
            )
        )
        for _ in range(n)
    ]
    blobs = [draw(st.binary(max_size=20)) for _ in range(n)]
    texts = [draw(st.text(max_size=10)) for _ in range(n)]
    return {"t": tensor, "s": seqs, "b": blobs, "x": texts}, {
        "t": stoker.Tensor(dtype, shape),
        "s": stoker.Sequence(seq_dtype),
        "b": stoker.Binary(),
        "x": stoker.String(),
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=tables(), shard_size=st.sampled_from([64, 512, 10**6]), order=st.randoms(use_true_random=False))
def test_round_trip(data, shard_size, order):
    columns, schema = data
    with tempfile.TemporaryDirectory() as tmp:
        stoker.write(Path(tmp) / "s", columns, schema, shard_size=shard_size)
        ds = stoker.open(Path(tmp) / "s", verify=True)
        n = len(columns["b"])
        assert len(ds) == n
        idx = list(range(n))
        order.shuffle(idx)
        got = ds[idx]
        np.testing.assert_array_equal(got["t"], columns["t"][idx])
        assert got["b"] == [columns["b"][i] for i in idx]
        assert got["x"] == [columns["x"][i] for i in idx]
        for k, i in enumerate(idx):
            np.testing.assert_array_equal(got["s"][k], columns["s"][i])
            assert got["s"][k].dtype == np.dtype(schema["s"].dtype)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    lengths=st.lists(st.integers(0, 7), min_size=1, max_size=60),
    shard_size=st.sampled_from([16, 64, 10**6]),
    picks=st.lists(st.integers(0, 10**6), max_size=50),
)
def test_sorted_gather_of_sequences_across_shards(lengths, shard_size, picks):
    """Sorted indices (repeats allowed) take the contiguous-run path of the sequence gather."""
    rows = [np.arange(100 * i, 100 * i + n, dtype=np.uint16) for i, n in enumerate(lengths)]
    with tempfile.TemporaryDirectory() as tmp:
        stoker.write(Path(tmp) / "s", {"s": rows}, {"s": stoker.Sequence("uint16")}, shard_size=shard_size)
        ds = stoker.open(Path(tmp) / "s")
        idx = np.sort(np.array(picks, dtype=np.int64) % len(rows))
        got = ds.gather(idx, ["s"])["s"]
        assert len(got) == len(idx)
        want = np.concatenate([rows[i] for i in idx]) if len(idx) else np.empty(0, np.uint16)
        np.testing.assert_array_equal(got.values, want)
        np.testing.assert_array_equal(got.lengths, [len(rows[i]) for i in idx])
