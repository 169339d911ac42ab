import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stoker.text.bucketing import LEAD_CUTS, LengthBuckets


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 300), min_size=1, max_size=400),
    batch_size=st.integers(1, 40),
    world=st.integers(1, 4),
    epoch=st.integers(0, 5),
    budget=st.one_of(st.none(), st.integers(300, 3000)),
)
def test_ranks_get_equal_counts_and_the_epoch_covers_every_row(lengths, batch_size, world, epoch, budget):
    lengths = np.array(lengths)
    samplers = [LengthBuckets(lengths, batch_size, budget, True, 7, 4, r, world) for r in range(world)]
    counts = {len(s) for s in samplers}
    assert len(counts) == 1
    got = [list(s.batches(epoch)) for s in samplers]
    assert all(len(g) == len(samplers[0]) for g in got)
    rows = np.concatenate([b for g in got for b in g])
    assert set(rows.tolist()) == set(range(len(lengths)))  # every row at least once (padding may repeat)
    every = samplers[0].epoch_batches(epoch)
    assert np.array_equal(np.sort(np.concatenate(every)), np.arange(len(lengths)))  # a partition of the rows
    if budget is not None:
        assert all(len(b) == 1 or len(b) * lengths[b].max() <= budget for b in every)
    # resume = tail of the uninterrupted epoch
    tail = list(samplers[0].batches(epoch, 1))
    assert all(np.array_equal(a, b) for a, b in zip(tail, got[0][1:]))


def _reference_epoch(
    lengths: np.ndarray, batch_size: int, window: int, shuffle: bool, seed: int, epoch: int
) -> list[np.ndarray]:
    """The fixed-batch_size epoch written plainly: the batch order (windows in a shuffled order, each
    window's batches by a random key; in the first of several windows its runs cut after batches
    1, 2, 4, 8, 16 and 32 of the window, run by run), then the rows of each group of batches sorted by
    length: a window, or in the first of several windows one of its runs."""
    rng = np.random.default_rng([seed, epoch])
    n = len(lengths)
    order = rng.permutation(n) if shuffle else np.arange(n)
    count = -(-n // batch_size)
    delivery = list(range(count))
    if shuffle:
        window_order = rng.permutation(-(-count // window))
        keys = rng.random(count)
        delivery = []
        for w in window_order.tolist():
            delivery += sorted(range(w * window, min((w + 1) * window, count)), key=lambda b: keys[b])
    lead = delivery[0] // window
    top = min((lead + 1) * window, count)
    runs = (
        [lead * window]
        + ([lead * window + c for c in (1, 2, 4, 8, 16, 32) if lead * window + c < top] if count > window else [])
        + [top]
    )

    def run_of(b):
        return max(k for k in range(len(runs) - 1) if runs[k] <= b)

    head = [b for b in delivery if b // window == lead]
    delivery = sorted(head, key=run_of) + delivery[len(head) :]
    out = []
    for b in delivery:
        w = b // window
        start, stop = w * window, min((w + 1) * window, count)
        if w == lead:
            start, stop = runs[run_of(b)], runs[run_of(b) + 1]
        rows = order[start * batch_size : stop * batch_size]
        rows = rows[np.argsort(lengths[rows], kind="stable")]
        out.append(rows[(b - start) * batch_size : (b - start + 1) * batch_size])
    return out


@settings(max_examples=80, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 2**20), min_size=1, max_size=300),
    batch_size=st.integers(1, 20),
    window=st.integers(1, 6),
    shuffle=st.booleans(),
    epoch=st.integers(0, 3),
    small=st.booleans(),
)
def test_window_sort_gives_the_batches_of_a_lexsort(lengths, batch_size, window, shuffle, epoch, small):
    lengths = np.array(lengths) % 300 if small else np.array(lengths)  # small: the 16-bit radix path
    got = LengthBuckets(lengths, batch_size, None, shuffle, 5, window).epoch_batches(epoch)
    want = _reference_epoch(lengths, batch_size, window, shuffle, 5, epoch)
    assert len(got) == len(want)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))


class Streamed:
    """Lengths told only when waited for (as the token cache of an on-the-fly source), recording the plan."""

    def __init__(self, lengths: np.ndarray) -> None:
        self.lengths, self.known_rows = lengths, np.zeros(len(lengths), bool)
        self.planned: list[np.ndarray] = []

    def __len__(self) -> int:
        return len(self.lengths)

    def known(self):
        return None

    def plan(self, blocks):
        self.planned = list(blocks)

    def wait(self, rows):
        self.known_rows[rows] = True
        return self.lengths[rows]

    def all(self):
        self.known_rows[:] = True
        return self.lengths


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 600), min_size=1, max_size=300),
    batch_size=st.integers(1, 20),
    window=st.integers(1, 6),
    shuffle=st.booleans(),
    world=st.integers(1, 3),
    epoch=st.integers(0, 3),
    start=st.integers(0, 10),
)
def test_streamed_lengths_give_the_batches_of_known_ones(lengths, batch_size, window, shuffle, world, epoch, start):
    lengths = np.array(lengths)
    for rank in range(world):
        known = LengthBuckets(lengths, batch_size, None, shuffle, 3, window, rank, world)
        stream = Streamed(lengths)
        streamed = LengthBuckets(stream, batch_size, None, shuffle, 3, window, rank, world)
        assert len(streamed) == len(known) and not stream.known_rows.any()  # the length needs no lengths
        start = min(start, len(known))
        first = next(streamed.batches(epoch, start), None)
        if first is not None:  # the first batch needed the rows of its own window only
            assert stream.known_rows.sum() <= window * batch_size and stream.known_rows[first].all()
            assert np.isin(first, stream.planned[0]).all()  # and was planned first
        got = list(
            LengthBuckets(Streamed(lengths), batch_size, None, shuffle, 3, window, rank, world).batches(epoch, start)
        )
        want = list(known.batches(epoch, start))
        assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))
        assert streamed.fingerprint() == known.fingerprint()


def test_the_first_batch_waits_for_its_own_rows_then_runs_then_windows_come_whole():
    """Streamed lengths: the first batch needs only its own rows' lengths (not a window's, nor the
    corpus'), the first window comes in runs of 1, 1, 2, 4, 8, 16 batches and the rest, then the
    epoch goes window by window; the batches are those of the lengths as an array."""
    lengths = np.random.default_rng(1).integers(1, 200, size=5000)
    streamed = Streamed(lengths)
    batches = LengthBuckets(streamed, 16, None, True, 3, 50).batches(0)
    first = next(batches)
    assert streamed.known_rows.sum() == 16
    runs = [1, 1, 2, 4, 8, 16, 50 - 32]
    assert [len(p) for p in streamed.planned[:8]] == [r * 16 for r in runs] + [50 * 16]
    assert list(LEAD_CUTS) == [1, 2, 4, 8, 16, 32]
    rest = [next(batches) for _ in range(50 - 1)]  # the rest of the first window
    assert streamed.known_rows.sum() == 50 * 16
    want = LengthBuckets(lengths, 16, None, True, 3, 50).epoch_batches(0)
    got = [first, *rest, *batches]
    assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))
