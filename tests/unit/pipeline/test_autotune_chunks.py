"""The online tuner's third knob, the chunk size (the data of one worker task): grown while tasks are
short and the consumer waits once neither more workers nor a deeper prefetch can be tried, kept only
when the rate rises, within its bounds; driven by injected window figures and a fake clock (no timing)."""

import numpy as np

from stoker.pipeline.autotune import AutoTuner, Bounds, Measure
from stoker.pipeline.autotune_policy import GROW, SHORT_TASK_S
from stoker.pipeline.executor import pass_tasks
from stoker.pipeline.tuning import CHUNK_BYTES, chunk_size


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def tuner(workers=1, prefetch=1, budget=None, max_chunk_bytes=16 * CHUNK_BYTES, batch_bytes=2**17):
    clock = Clock()
    t = AutoTuner(workers, prefetch, True, True, Bounds(4, 8, budget, max_chunk_bytes=max_chunk_bytes), clock=clock)
    t.tune_chunk = True  # as the loader sets it when chunk_size is None
    t.begin_pass(chunk_size(batch_bytes), batch_bytes)
    return t, clock


def window(rate, wait, busy, task_s):
    """One second's figures, with worker tasks of ``task_s`` seconds."""
    return Measure(1.0, wait, max(1, round(rate)), busy, 0.0, tasks=10, task_s=task_s)


def verify(t, clock, m):
    clock.t += 1
    assert t.step(m) is None and t._pending is not None
    clock.t += 1
    return t.step(m)


def test_workers_and_prefetch_come_before_the_chunk():
    t, _ = tuner()
    d = t.step(window(100, 0.5, 0.95, 0.3e-3))  # short tasks, but a second worker may be tried
    assert d.action == "add worker" and t.chunk_target() == CHUNK_BYTES


def test_short_tasks_grow_the_chunk_at_the_most_workers_and_a_gain_keeps_it():
    t, clock = tuner(workers=4, prefetch=8)  # the bounds' most: nothing else to add
    assert t.chunk_target() == CHUNK_BYTES and t.batches_per_chunk() == 8  # 128 KiB batches: 8 a default chunk
    d = t.step(window(100, 0.5, 0.95, 0.3e-3))
    assert d.action == GROW and t.chunk_target() == 2 * CHUNK_BYTES and (t.workers, t.prefetch) == (4, 8)
    assert d.chunk_bytes == 2 * CHUNK_BYTES and "chunks of 2 MiB" in str(d) and "0.30 ms" in d.reason
    d = verify(t, clock, window(130, 0.4, 0.95, 0.5e-3))  # 30 % faster: kept, and the tasks are still short
    assert d.action == GROW and t.chunk_target() == 4 * CHUNK_BYTES
    assert "chunks of 4 MiB" in str(t.report())


def test_a_larger_chunk_that_does_not_pay_is_undone_and_blocked():
    t, clock = tuner(workers=4, prefetch=8)
    assert t.step(window(100, 0.5, 0.95, 0.3e-3)).action == GROW
    d = verify(t, clock, window(101, 0.5, 0.95, 0.6e-3))
    assert d.action == "undo" and t.chunk_target() == CHUNK_BYTES
    clock.t += 0.1
    d = t.step(window(100, 0.5, 0.95, 0.3e-3))  # not the chunk again, for a while
    assert d.action == "hold" and "chunks of 2 MiB did not raise the rate" in d.reason
    assert t.chunk_target() == CHUNK_BYTES


def test_long_tasks_leave_the_chunk_alone():
    t, _ = tuner(workers=4, prefetch=8)
    d = t.step(window(100, 0.5, 0.95, 2 * SHORT_TASK_S))
    assert d.action == "hold" and t.chunk_target() == CHUNK_BYTES


def test_the_chunk_is_not_tuned_when_fixed_with_processes_or_at_its_bound():
    t, _ = tuner(workers=4, prefetch=8)
    t.tune_chunk = False  # chunk_size given
    assert t.step(window(100, 0.5, 0.95, 0.3e-3)).action == "hold" and t.chunk_target() is None
    t, _ = tuner(workers=4, prefetch=8)
    t.for_processes()  # slots are sized when the pool starts
    assert t.step(window(100, 0.5, 0.95, 0.3e-3)).action == "hold" and t.chunk_target() is None
    t, _ = tuner(workers=4, prefetch=8, max_chunk_bytes=CHUNK_BYTES)
    assert t.step(window(100, 0.5, 0.95, 0.3e-3)).action == "hold" and t.chunk_target() == CHUNK_BYTES


def test_a_chunk_grows_to_the_next_size_that_holds_more_batches():
    t, _ = tuner(workers=4, prefetch=8, batch_bytes=3 * 2**20)  # 3 MiB batches: one a chunk at 1 and 2 MiB
    assert t.batches_per_chunk() == 1
    assert t.step(window(100, 0.5, 0.95, 0.3e-3)).action == GROW
    assert t.chunk_target() == 8 * CHUNK_BYTES and t.batches_per_chunk() == 2


def test_the_memory_budget_bounds_the_chunk():
    t, _ = tuner(workers=2, prefetch=2, budget=4 * CHUNK_BYTES)  # 2 x 2 x 1 MiB in flight: the budget
    d = t.step(window(100, 0.5, 0.95, 0.3e-3))
    assert d.action != GROW and t.chunk_target() == CHUNK_BYTES


def test_chunks_follow_the_target_from_the_next_chunk_on_past_the_default_bound():
    target = [CHUNK_BYTES]
    batches = [np.arange(k, k + 1) for k in range(2000)]
    largest, tasks = pass_tasks(0, batches, lambda: 2**17, target=lambda: target[0])
    assert largest == 8
    sizes = []
    for _, first, chunk in tasks:
        sizes.append(len(chunk))
        if first >= 100:
            target[0] = 8 * CHUNK_BYTES  # 64 batches a chunk from the next one on
    assert sizes[:6] == [1, 2, 4, 8, 8, 8] and max(sizes) == 64 and sum(sizes) == 2000
    _, fixed = pass_tasks(0, batches, lambda: 2**17, most=3, target=lambda: 8 * CHUNK_BYTES)
    assert max(len(c) for _, _, c in fixed) == 3  # a chunk_size given wins over the tuner
