"""A running ordered_map resized through its Knobs: threads added and retired, depth changed, order kept."""

import threading

from stoker.pipeline.threads import Knobs, ordered_map


def _stoker_threads(stage):
    return [t for t in threading.enumerate() if t.name.startswith(f"stoker-{stage}") and t.is_alive()]


def test_workers_grow_and_shrink_while_running_order_kept():
    knobs = Knobs(1, 1)
    out, serving, alive = [], [], None
    it = ordered_map(lambda i: i * 3, range(60), workers=1, depth=1, stage="resize", knobs=knobs)
    for n, value in enumerate(it):
        out.append(value)
        serving.append(knobs.threads)
        if n == 10:
            knobs.workers, knobs.depth = 4, 8
        if n == 20:
            assert len(_stoker_threads("resize")) == 4  # started at once, while the map runs
        if n == 40:
            knobs.workers, knobs.depth = 2, 2
        if n == 50:  # the retired two take their stop signal after the queued tasks, then end
            for t in _stoker_threads("resize"):
                t.join(0.2)
            alive = len(_stoker_threads("resize"))
    assert out == [i * 3 for i in range(60)]
    assert (serving[5], serving[20], serving[50]) == (1, 4, 2)
    assert alive == 2
    assert _stoker_threads("resize") == []  # every thread, retired or not, joined at the end


def test_depth_bounds_items_in_flight_after_a_change():
    knobs = Knobs(2, 2)
    started = []

    def work(i):
        started.append(i)
        return i

    it = ordered_map(work, range(200), workers=2, depth=2, stage="depth", knobs=knobs)
    next(it)
    seen_flight = [knobs.in_flight]
    knobs.depth = 6
    for _ in range(20):
        next(it)
        seen_flight.append(knobs.in_flight)
    knobs.depth = 1
    for _ in range(20):
        next(it)
        seen_flight.append(knobs.in_flight)
    it.close()
    assert seen_flight[0] <= 2
    assert max(seen_flight[1:21]) == 6  # deepened: six in flight when the consumer asks
    assert seen_flight[-1] == 1  # made shallower: back to one as results were handed out
    assert len(started) <= 41 + 6


def test_retired_threads_finish_queued_work_and_errors_are_still_tagged():
    knobs = Knobs(3, 6)

    def work(i):
        if i == 30:
            raise ValueError("bad item")
        return i

    it = ordered_map(work, range(50), workers=3, depth=6, stage="tagged", knobs=knobs)
    got = []
    try:
        for v in it:
            got.append(v)
            if v == 5:
                knobs.workers, knobs.depth = 1, 1
    except ValueError as exc:
        assert any("stage 'tagged'" in note and "batch 30" in note for note in exc.__notes__)
    else:
        raise AssertionError("the error was not raised")
    assert got == list(range(30))
    assert _stoker_threads("tagged") == []


def test_zero_workers_reads_in_the_calling_thread_then_threads_again():
    knobs = Knobs(2, 4)
    me = threading.current_thread().name
    where = {}

    def work(i):
        where[i] = threading.current_thread().name
        return i

    out = []
    for n, v in enumerate(ordered_map(work, range(60), workers=2, depth=4, stage="inline", knobs=knobs)):
        out.append(v)
        if n == 10:
            knobs.workers, knobs.depth = 0, 0  # those in flight are handed out, then reads come here
        if n == 40:
            knobs.workers, knobs.depth = 2, 4
    assert out == list(range(60))
    assert all(where[i] == me for i in range(20, 41)) and where[5] != me and where[55] != me
    assert _stoker_threads("inline") == []


def test_a_map_that_starts_inline_starts_no_thread_until_asked():
    """A pass the online tuner begins at 0 workers started an idle thread anyway (its start and join
    were 10-20 % of a 3.5 ms epoch); now the first thread starts when knobs.workers asks for one."""
    knobs = Knobs(0, 2)
    seen = []

    def work(i):
        seen.append((i, len(_stoker_threads("inline"))))
        return i

    out = []
    for n, value in enumerate(ordered_map(work, range(30), workers=0, depth=2, stage="inline", knobs=knobs)):
        out.append(value)
        if n == 9:
            knobs.workers = 2
    assert out == list(range(30))
    assert all(threads == 0 for i, threads in seen if i < 10)  # read inline, no pool
    assert any(threads == 2 for i, threads in seen if i >= 12)  # then a pool, once asked
    assert knobs.threads == 2
    for t in _stoker_threads("inline"):
        t.join(5)
    assert not _stoker_threads("inline")
