"""stoker.doctor.sampler: the CPU of a process tree, its children included."""

import multiprocessing
import os
import time

import psutil

from stoker.doctor.sampler import USS_BUDGET, USS_SLOWDOWN_S, ResourceSampler


def _burn_then_wait(seconds, burnt, go):
    """Spend ``seconds`` of CPU, say so, and stay alive until told to go (a process that exits
    between two samples loses its CPU of that interval)."""
    t = time.process_time()
    while time.process_time() - t < seconds:
        pass
    burnt.set()
    go.wait(120)


def _until(condition, what):
    deadline = time.monotonic() + 120  # a bound for a broken sampler, not a speed
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_sampler_counts_child_processes_cpu():
    """Two children spend 0.4 CPU-s each (CPU time: however loaded the machine, it takes as long
    as it takes), and live on until a sample has seen all of it: the samples add up to 0.8 CPU-s
    of children."""
    sampler = ResourceSampler(os.getpid(), interval=0.05).start()
    ctx = multiprocessing.get_context("fork")
    burnt, go = [ctx.Event(), ctx.Event()], ctx.Event()
    try:
        _until(lambda: sampler.samples, "no first sample")  # the baseline is taken: the children's CPU all counts
        procs = [ctx.Process(target=_burn_then_wait, args=(0.4, b, go)) for b in burnt]
        for p in procs:
            p.start()
        _until(lambda: all(b.is_set() for b in burnt), "the children did not finish burning")
        t_burnt = time.perf_counter()
        _until(lambda: sampler.samples[-1]["t"] > t_burnt, "no sample after the children burnt their CPU")
    finally:
        go.set()
    for p in procs:
        p.join()
    samples = sampler.stop()
    assert max(s["procs"] for s in samples) >= 3  # this process and its two children
    assert all(0 < s["uss"] <= s["pss"] <= s["rss"] for s in samples)  # forked children share pages: PSS below RSS
    children = sum((b["cpu_tree"] - b["cpu_root"]) * (b["t"] - a["t"]) for a, b in zip(samples, samples[1:]))
    assert 0.7 < children < 1.5, children  # 0.8 CPU-s and the children's start-up
    assert sampler.gpu_status  # a device name, or "no GPU (...)" and sampling went on
    if "gpu" not in samples[0]:
        assert sampler.gpu_status.startswith("no GPU")


def test_memory_reads_are_spaced_by_what_the_whole_tree_costs():
    """A process's USS/PSS is read again only after USS_BUDGET times the last reads of every process of the
    tree (at most 1 % of a core however many workers); a process gone from the tree no longer counts."""
    ctx = multiprocessing.get_context("fork")
    go = ctx.Event()
    child = ctx.Process(target=go.wait, args=(120,))
    child.start()
    try:
        sampler = ResourceSampler(os.getpid())
        me, other = os.getpid(), child.pid
        assert sampler._memory(me) is not None and sampler._memory(other) is not None  # both due at first
        costs = sampler._uss_cost
        assert set(costs) == {me, other} and all(c > 0 for c in costs.values())
        assert sampler._uss_due[other] >= sampler._uss_due[me] + USS_BUDGET * costs[other]  # mine counted in its wait
        assert sampler._memory(me) is None and sampler._memory(other) is None  # not due yet
    finally:
        go.set()
        child.join()
    sampler._tree(psutil.Process(me))
    # the child ended: its cost no longer spaces the reads (other children of this test process, left by
    # earlier tests of the suite, may be in the tree and counted)
    assert me in sampler._uss_cost and other not in sampler._uss_cost


def test_memory_reads_thin_out_as_the_run_goes_on():
    """Ten minutes into a run a process's memory is read 11 times less often than at its start
    (1 + 600 s / USS_SLOWDOWN_S): a long run's reads cost about 0.1 % of a core, not 1 %."""
    sampler = ResourceSampler(os.getpid())
    me = os.getpid()
    before = time.perf_counter()
    assert sampler._memory(me) is not None
    young = sampler._uss_due[me] - before
    assert young >= USS_BUDGET * sampler._uss_cost[me]
    sampler._t0 -= 600.0  # as if it had sampled for ten minutes
    sampler._uss_due.clear()
    before = time.perf_counter()
    assert sampler._memory(me) is not None
    aged = sampler._uss_due[me] - before
    assert aged >= USS_BUDGET * (1 + 600.0 / USS_SLOWDOWN_S) * sampler._uss_cost[me]
