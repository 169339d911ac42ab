"""Elastic resume of the text samplers (issue 18): a state saved on N ranks resumes on M.

Ranks are simulated in one process: one loader per rank with ``rank=``/``world_size=``, each
reads the first batches of an epoch and saves its state; then loaders of another world size
load one saved state and read the rest. Across both parts every example (bucketing) or every
packed block (packing) is seen exactly once, ``uneven`` deciding only the end of the epoch.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

import stoker
import stoker.text
from stoker.errors import StateError
from stoker.store.columns import Ragged
from stoker.text.bucketing import LengthBuckets
from stoker.text.packing import PackedBatches, PackedText, ragged_docs

N = 301  # examples: a prime, so batches never split evenly over ranks
ROWS = {"text": [" ".join(["word"] * (1 + (i * 7) % 23)) for i in range(N)], "label": list(range(N))}
TEXT = dict(batch_size=5, shuffle=True, seed=3, bucket_window=4, max_length=32, num_workers=0)


def text_loader(rank: int, world: int, **kw) -> stoker.text.Loader:
    return stoker.text.Loader(ROWS, rank=rank, world_size=world, **{**TEXT, **kw})


def examples(batches) -> list[int]:
    return [int(x) for b in batches for x in b["labels"].tolist()]


def split_run(make, before: int, after: int, k: int, key=examples):
    """``before`` ranks read ``k`` batches each of epoch 1 and save; ``after`` ranks resume rank 0's state."""
    head, states = [], []
    for r in range(before):
        loader = make(r, before)
        loader.set_epoch(1)
        it = iter(loader)
        head += key(next(it) for _ in range(k))
        states.append(json.loads(json.dumps(loader.state_dict())))
        it.close()
    tails, counts = [], set()
    for r in range(after):
        loader = make(r, after)
        loader.load_state_dict(states[0])
        batches = list(loader)
        counts.add(len(batches))
        tails.append(key(batches))
    assert len(counts) == 1  # as many batches on every new rank
    return head, tails, states


def epoch_batches(uneven: str = "pad") -> list[list[int]]:
    """Epoch 1's batches in the epoch's order (one rank reads them all)."""
    loader = text_loader(0, 1, uneven=uneven)
    loader.set_epoch(1)
    return [b["labels"].tolist() for b in loader]


@pytest.mark.parametrize("before,after", [(4, 2), (4, 3), (2, 4)])
def test_bucketed_text_resumes_on_another_world_size_every_example_once(before, after):
    head, tails, states = split_run(text_loader, before, after, 6)
    assert all(s == states[0] for s in states)  # the same state on every rank: rank 0's resumes all
    assert "rank" not in states[0]["order"] and "world_size" not in states[0]["order"]
    total = -(-N // 5)  # 61 batches in the epoch's order
    left = total - 6 * before
    pad = -left % after  # uneven="pad": that many batches from the start of the epoch again
    repeated = Counter(x for b in epoch_batches()[:pad] for x in b)
    assert Counter(head + [x for t in tails for x in t]) == Counter(range(N)) + repeated


def test_bucketed_text_with_uneven_drop_leaves_out_only_the_last_batches_of_the_order():
    head, tails, _ = split_run(lambda r, w: text_loader(r, w, uneven="drop"), 4, 3, 5)
    seen = head + [x for t in tails for x in t]
    assert len(seen) == len(set(seen))  # never twice
    order = epoch_batches("drop")
    left = len(order) - 5 * 4  # 41 batches left over 3 ranks: 13 each, the last 2 of the order out
    assert set(range(N)) - set(seen) == {x for b in order[-(left % 3) :] for x in b}


def test_bucketed_batches_are_those_of_one_rank_reading_the_epoch():
    # the deal changes with the world size, the batches do not: each resumed batch is one of the epoch's
    _, tails, _ = split_run(lambda r, w: text_loader(r, w), 2, 3, 4, key=lambda bs: [b["labels"].tolist() for b in bs])
    every = [sorted(b) for b in epoch_batches()]
    assert all(sorted(b) in every for t in tails for b in t)


def test_a_max_tokens_bucketing_resumes_on_another_world_size(tmp_path):
    lengths = np.random.default_rng(1).integers(1, 60, size=N)

    def make(r, w):  # core loader over a store of row numbers; the text sampler decides the batches
        sampler = LengthBuckets(lengths, None, 200, True, 5, 8, r, w, "drop")
        return stoker.Loader(store_of_rows, batch_sampler=sampler, num_workers=0)

    store_of_rows = stoker.write(tmp_path / "rows", {"label": np.arange(N, dtype=np.int64)}, shard_size=64)
    key = lambda bs: [int(x) for b in bs for x in b["label"].tolist()]  # noqa: E731
    head, tails, _ = split_run(make, 3, 2, 4, key=key)
    seen = head + [x for t in tails for x in t]
    assert len(seen) == len(set(seen))
    every = LengthBuckets(lengths, None, 200, True, 5, 8).epoch_batches(1)
    dropped = (len(every) - 4 * 3) % 2
    assert set(range(N)) - set(seen) == {int(x) for b in every[len(every) - dropped :] for x in b}


# -- packing -------------------------------------------------------------------------------------
DOC_LENGTHS = np.random.default_rng(2).integers(3, 40, size=97)
TOKENS = int(DOC_LENGTHS.sum())
# every token of the corpus is its own id, so a block's ids say which tokens it holds
DOCS = Ragged(np.arange(TOKENS, dtype=np.int64), np.concatenate([[0], np.cumsum(DOC_LENGTHS)]).astype(np.int64))
BLOCK = 16


def packed_loader(rank: int, world: int, uneven: str = "drop", drop_last: bool = False) -> stoker.Loader:
    source = PackedText(ragged_docs(DOCS), DOC_LENGTHS, BLOCK, seed=4)
    sampler = PackedBatches(DOC_LENGTHS, BLOCK, 3, True, 4, rank, world, drop_last, uneven)
    return stoker.Loader(source, batch_sampler=sampler, num_workers=0)


def blocks(batches) -> list[tuple[int, ...]]:
    return [tuple(row) for b in batches for row in b["input_ids"].tolist()]


def packed_epoch() -> list[tuple[int, ...]]:
    loader = packed_loader(0, 1)
    loader.set_epoch(1)
    return blocks(loader)


@pytest.mark.parametrize("before,after", [(4, 2), (4, 3), (2, 4)])
def test_packed_blocks_resume_on_another_world_size_every_block_once(before, after):
    order = packed_epoch()  # the epoch's blocks in order, all of them
    assert len(order) == TOKENS // BLOCK
    head, tails, states = split_run(lambda r, w: packed_loader(r, w), before, after, 2, key=blocks)
    assert all(s == states[0] for s in states) and "rank" not in states[0]["order"]
    seen = head + [x for t in tails for x in t]
    assert len(seen) == len(set(seen))  # every block at most once
    left = len(order) - 2 * 3 * before  # batches of 3 blocks
    assert set(order) - set(seen) == set(order[len(order) - left % after :] if left % after else [])


def test_packed_blocks_with_uneven_pad_repeat_the_first_blocks_of_the_order():
    order = packed_epoch()
    head, tails, _ = split_run(lambda r, w: packed_loader(r, w, "pad"), 2, 3, 3, key=blocks)
    left = len(order) - 3 * 3 * 2
    assert Counter(head + [x for t in tails for x in t]) == Counter(order) + Counter(order[: -left % 3])


def test_packed_drop_last_drops_each_new_ranks_short_batch_only():
    order = packed_epoch()
    head, tails, _ = split_run(lambda r, w: packed_loader(r, w, drop_last=True), 3, 2, 2, key=blocks)
    seen = head + [x for t in tails for x in t]
    assert len(seen) == len(set(seen))
    per_rank = (len(order) - 2 * 3 * 3) // 2
    assert all(len(t) == per_rank // 3 * 3 for t in tails)  # whole batches of 3 blocks


def test_the_fingerprints_name_no_rank_and_a_changed_setting_is_refused():
    a = LengthBuckets(np.arange(1, 50), 4, rank=1, world_size=3)
    b = LengthBuckets(np.arange(1, 50), 4, rank=0, world_size=2)
    assert a.fingerprint() == b.fingerprint()
    p = PackedBatches(DOC_LENGTHS, BLOCK, 3, rank=2, world_size=4)
    assert p.fingerprint() == PackedBatches(DOC_LENGTHS, BLOCK, 3).fingerprint()
    with pytest.raises(StateError, match="uneven"):
        PackedBatches(DOC_LENGTHS, BLOCK, 3, uneven="pad").check_fingerprint(p.fingerprint())


def test_resuming_past_the_end_is_refused():
    sampler = LengthBuckets(np.arange(1, 50), 4, rank=0, world_size=2)  # 13 batches: 7 per rank
    with pytest.raises(StateError, match="only 7 batches were left"):
        sampler.position(0, 8, 2)
    assert sampler.position(0, 7, 2) == 13  # the end of the epoch (rank 1 padded its last batch)
    packed = PackedBatches(DOC_LENGTHS, BLOCK, 3, world_size=2)
    with pytest.raises(StateError, match="an epoch has"):
        packed.position(10**6, 0, 2)
