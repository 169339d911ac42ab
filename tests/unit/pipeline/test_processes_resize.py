"""ProcessPool resized while a map runs: processes forked and retired, results in order, retired ones not deaths."""

import os

from stoker.pipeline.processes import ProcessPool
from stoker.pipeline.threads import Knobs


def pid_of(i):
    return {"i": i, "pid": os.getpid()}


def test_workers_are_added_and_retired_while_mapping(shm_clean):
    pool = ProcessPool(pid_of, 2, stage="resize")
    knobs = Knobs(2, 2)
    try:
        out, counts = [], []
        for n, r in enumerate(pool.map(range(120), depth=2, knobs=knobs)):
            out.append((int(r["i"]), int(r["pid"])))
            counts.append(pool.workers)
            if n == 20:
                knobs.workers, knobs.depth = 4, 8
            if n == 60:
                knobs.workers, knobs.depth = 1, 1  # three retire after the tasks they were sent
            if n == 90:
                knobs.workers, knobs.depth = 3, 3  # forked again, in the places of ended ones
        assert [i for i, _ in out] == list(range(120))
        assert (counts[10], counts[40], counts[80], counts[110]) == (2, 4, 1, 3)
        late = {pid for i, pid in out[75:90]}
        assert len(late) == 1  # one process served once the others retired
        assert len({pid for _, pid in out}) >= 5  # and new ones came after
        again = [int(r["i"]) for r in pool.map(range(10), depth=3)]  # the pool goes on, resized
        assert again == list(range(10)) and pool.workers == 3
    finally:
        pool.close()


def test_occupancy_is_read_before_waiting(shm_clean):
    """One worker, one task in flight: when the consumer asks, nothing is ready yet and one task is out
    (the tuner's busy share of processes is the tasks outstanding: 1 of 1 worker)."""
    pool = ProcessPool(pid_of, 1, stage="occupancy")
    knobs = Knobs(1, 1)
    try:
        seen = [(knobs.ready, knobs.in_flight) for _ in pool.map(range(5), depth=1, knobs=knobs)]
        assert seen == [(0, 1)] * 5
    finally:
        pool.close()
