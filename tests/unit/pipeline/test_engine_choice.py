"""engine="auto": the rule on measured figures, and what a loader says it chose."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest
import torch

import stoker
from stoker.pipeline.engine_choice import AutoReport, Calibration, EngineChoice
from stoker.pipeline.schedule import usable_cores


def _measured(reads: list[tuple[float, float, float]], waited: float, workers: int = 2, span: float = 1.0):
    """A calibration that saw ``reads`` (wall, cpu, run queue) over ``span`` seconds after the
    consumer's first batch, the consumer waiting ``waited`` seconds of it."""
    cal = Calibration(workers)
    cal.consumer_started()
    cal._since = time.perf_counter() - span
    cal._reads = [(cal._since + 0.01 * i, w, c, q) for i, (w, c, q) in enumerate(reads)]
    cal._waited = waited
    return cal.decide()


needs_two_cores = pytest.mark.skipif(usable_cores() < 2, reason="the rule needs two usable cores to get past step 2")


@needs_two_cores
def test_reads_that_sleep_a_quarter_of_their_time_go_to_processes():
    choice = _measured([(0.1, 0.07, 0.0)] * 10, waited=0.2)  # 30 % of the read time neither on a CPU nor queued
    assert choice.engine == "processes" and choice.blocked == pytest.approx(0.3)
    assert "slept 30%" in str(choice) and "engine='auto' chose processes" in str(choice)


@needs_two_cores
def test_waiting_for_a_core_is_not_counted_as_the_gil():
    choice = _measured([(0.1, 0.05, 0.05)] * 10, waited=0.2)  # half the time queued for a core
    assert choice.engine == "threads" and choice.blocked == pytest.approx(0.0) and choice.queued == pytest.approx(0.5)


@needs_two_cores
def test_image_reads_beside_a_python_step_on_a_busy_host_go_to_processes():
    """Figures measured on 2 shared cores: image reads (decode + resample, the GIL taken back ~7 times
    per image) beside a 30 ms pure-Python step slept 10 % of their wall time and queued 69 % for a
    core. Old rule (sleep over the whole wall time): 10 % < 25 %, threads, where processes were faster.
    Off the run queue they slept 10 / 31 = 32 % of their time."""
    choice = _measured([(0.1, 0.021, 0.069)] * 15, waited=0.57)  # 1.35 reads at once (measured: 1.32)
    assert choice.engine == "processes" and choice.blocked == pytest.approx(0.32, abs=0.01)
    assert choice.queued == pytest.approx(0.69) and "slept >= 25%" in choice.reason
    assert "off the run queue" in choice.reason


@needs_two_cores
def test_image_reads_beside_an_idle_consumer_keep_threads():
    """The same reads with no step (measured): 2 % of the wall time asleep, 62 % queued (5 % off the queue)."""
    choice = _measured([(0.1, 0.036, 0.062)] * 17, waited=1.0)  # 1.67 reads at once (measured: 1.69)
    assert choice.engine == "threads" and choice.blocked == pytest.approx(0.05, abs=0.01)


@needs_two_cores
def test_short_reads_run_one_at_a_time_while_the_consumer_waits_go_to_processes():
    """Pure-Python reads shorter than the GIL's switch interval wait between reads, not inside them."""
    choice = _measured([(0.01, 0.01, 0.0)] * 90, waited=0.9, span=1.0)  # 0.9 read-seconds per second: serial
    assert choice.engine == "processes" and choice.parallel == pytest.approx(0.9, rel=0.01)
    assert "one at a time" in choice.reason


@needs_two_cores
def test_parallel_reads_or_a_consumer_that_does_not_wait_keep_threads():
    assert _measured([(0.01, 0.01, 0.0)] * 180, waited=0.9).engine == "threads"  # 1.8 reads at once
    assert _measured([(0.01, 0.01, 0.0)] * 90, waited=0.1).engine == "threads"  # data is not the bottleneck


def test_too_few_reads_keep_threads_for_now_and_say_so():
    choice = _measured([(0.1, 0.1, 0.0)], waited=0.5)
    assert choice.engine == "threads" and not choice.settled
    if usable_cores() >= 2:
        assert "too few" in choice.reason


class Rows(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int) -> np.ndarray:
        return np.full(4, i, dtype=np.int64)


def test_an_auto_loader_gives_the_same_batches_and_says_what_it_chose():
    loader = stoker.Loader(Rows(), batch_size=4, num_workers=2, engine="auto")
    assert isinstance(loader.report(), AutoReport) and loader.report().engine is None
    assert "not chosen yet" in str(loader.report())
    got = [b.clone() for b in loader]
    assert torch.equal(torch.cat(got)[:, 0], torch.arange(256))
    choice = loader.engine_choice
    assert isinstance(choice, EngineChoice) and choice.engine in ("threads", "processes")
    assert loader.report().engine is choice and str(choice) in str(loader.report())
    assert loader.observers.info.engine == choice.engine
    if choice.settled:
        assert loader.engine == choice.engine
    second = [b.clone() for b in loader]  # a second pass on the engine chosen
    assert torch.equal(torch.cat(second)[:, 0], torch.arange(256))
    loader.close()


def test_auto_with_no_workers_is_threads_and_says_why():
    loader = stoker.Loader(Rows(), batch_size=4, num_workers=0, engine="auto")
    assert len(list(loader)) == 64
    assert loader.engine_choice is not None and loader.engine_choice.engine == "threads"
    assert "num_workers=0" in str(loader.report())


def test_auto_on_one_core_is_threads_and_says_why(tmp_path):
    script = tmp_path / "one_core.py"
    script.write_text(
        "import os, numpy as np, torch, stoker\n"
        "os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})\n"
        "class R(torch.utils.data.Dataset):\n"
        "    def __len__(self): return 64\n"
        "    def __getitem__(self, i): return np.full(2, i)\n"
        "loader = stoker.Loader(R(), batch_size=4, num_workers=2, engine='auto')\n"
        "assert len(list(loader)) == 16\n"
        "print(loader.report())\n"
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "chose threads: one usable core" in proc.stdout


def test_an_unknown_engine_names_auto_among_the_choices():
    with pytest.raises(stoker.errors.ConfigError, match="auto"):
        stoker.Loader(Rows(), engine="fibers")
