"""Conversions killed with SIGKILL at chosen points, and two conversions at once (issue 15, items 9-11).

Every kill point is reached deterministically: the child process announces on stderr that it
has stopped there and waits, and the test kills it only then (no sleeps, no deadlines). The
points come from the test's own dataset (it stops at a chosen index, after the shards before
it were committed), from a wrapped ``os.rename``, or from ``tests/pause_at.py``, which runs the
script with a point of stoker's own code wrapped to stop there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import stoker

pytestmark = pytest.mark.faults

ROWS = 64
CHUNK = 8  # samples per task; with 4 int64 per row a 256-byte shard is exactly one task
PAUSE_AT = Path(__file__).resolve().parents[1] / "pause_at.py"  # fault injection: stop at a named point
PAUSE = 16  # the dataset stops at this index: shards 0 and 1 (rows 0..15) are committed by then

DATA = textwrap.dedent(
    """
    import os, sys, threading
    import numpy as np

    class Rows:
        '''ROWS rows of 4 int64; FAULT_SEED picks the content, FAULT_PAUSE_AT an index to stop at.'''

        def __init__(self):
            self.seed = int(os.environ.get("FAULT_SEED", "0"))
            self.pause_at = int(os.environ.get("FAULT_PAUSE_AT", "-1"))
            self.calls = 0

        def __len__(self):
            return 64

        def __getitem__(self, i):
            self.calls += 1
            # the conversion's own read (a content fingerprint reads at most 12 samples first)
            if i == self.pause_at and self.calls > 12:
                sys.stderr.write("dataset-paused\\n")
                sys.stderr.flush()
                threading.Event().wait()
            return {"x": np.full(4, 1000 * self.seed + i, np.int64)}

    rows = Rows()
    """
)


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "faultdata.py").write_text(DATA)
    return tmp_path


def _cmd(*extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "stoker.cli.main",
        "convert",
        "dataset",
        "faultdata:rows",
        "s",
        "--workers",
        "0",
        "--chunk-size",
        str(CHUNK),
        "--shard-size",
        "256",
        "--no-progress",
        *extra,
    ]


def _env(work: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAULT_")}
    path = os.pathsep.join(p for p in (str(work), env.get("PYTHONPATH", "")) if p)
    return {**env, "PYTHONPATH": path, **extra}


def _start_paused(cmd: list[str], cwd: Path, env: dict[str, str], marker: str) -> subprocess.Popen[str]:
    """Start ``cmd`` and return once it has written ``marker`` to stderr (it then waits to be killed)."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:  # blocks until the line comes, or EOF if the child ended without pausing
        seen.append(line)
        if line.strip() == marker:
            return proc
    proc.wait()
    raise AssertionError(f"the child ended (rc {proc.returncode}) without reaching {marker!r}: {''.join(seen)}")


def _kill(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    if proc.stderr is not None:
        proc.stderr.close()


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)


def test_a_second_conversion_is_refused_while_the_first_runs(work):
    """Item 9: the staging directory is locked; the refusal names the running conversion's pid."""
    first = _start_paused(_cmd(), work, _env(work, FAULT_PAUSE_AT=str(PAUSE)), "dataset-paused")
    try:
        second = _run(_cmd(), work, _env(work))
        assert second.returncode != 0, second.stderr
        assert f"pid {first.pid}" in second.stderr and "in use by another conversion" in second.stderr
        assert not (work / "s").exists()
    finally:
        _kill(first)
    third = _run(_cmd(), work, _env(work))  # the lock went with the killed process
    assert third.returncode == 0, third.stderr
    assert f"resuming at row {PAUSE} " in third.stderr
    ds = stoker.open(work / "s", verify=True)
    assert ds[:]["x"][:, 0].tolist() == list(range(ROWS))
    assert not (work / "s" / ".lock").exists() and not (work / ".s.partial").exists()


def test_a_resume_refuses_another_datasets_shards(work):
    """Item 10: same class, length and target, other content: refused, not mixed; --overwrite starts over."""
    first = _start_paused(_cmd(), work, _env(work, FAULT_SEED="1", FAULT_PAUSE_AT=str(PAUSE)), "dataset-paused")
    _kill(first)
    other = _run(_cmd(), work, _env(work, FAULT_SEED="2"))
    assert other.returncode != 0, other.stdout
    assert "another dataset" in other.stderr and "--overwrite" in other.stderr, other.stderr
    assert not (work / "s").exists()
    fresh = _run(_cmd("--overwrite"), work, _env(work, FAULT_SEED="2"))
    assert fresh.returncode == 0, fresh.stderr
    assert "resuming" not in fresh.stderr
    assert stoker.open(work / "s")[:]["x"][:, 0].tolist() == [2000 + i for i in range(ROWS)]


def test_the_same_dataset_resumes_and_says_where(work):
    """Item 10: the same content resumes after the finished shards and says at which row."""
    _kill(_start_paused(_cmd(), work, _env(work, FAULT_SEED="3", FAULT_PAUSE_AT=str(PAUSE)), "dataset-paused"))
    again = _run(_cmd(), work, _env(work, FAULT_SEED="3"))
    assert again.returncode == 0, again.stderr
    assert f"stoker: resuming at row {PAUSE} " in again.stderr
    assert stoker.open(work / "s")[:]["x"][:, 0].tolist() == [3000 + i for i in range(ROWS)]


WRITE = textwrap.dedent(
    """
    import os, sys, threading
    import numpy as np
    import stoker

    if os.environ.get("FAULT_TWO_STEP"):
        # the path taken where renameat2(RENAME_EXCHANGE) is missing; stop after the first rename
        try:
            import stoker.store.replace as replace
            replace.exchange = lambda a, b: False
        except ImportError:  # a stoker without the atomic swap: its writer always renames twice
            pass
        rename = os.rename

        def stop_after_hiding(src, dst):
            rename(src, dst)
            if ".old-" in os.fspath(dst):
                sys.stderr.write("renamed-once\\n")
                sys.stderr.flush()
                threading.Event().wait()

        os.rename = stop_after_hiding
    stoker.write(sys.argv[1], {"x": np.full(10, int(sys.argv[2]))}, overwrite=True, shard_size=64)
    """
)


def _old_store(work: Path) -> Path:
    dest = work / "d"
    stoker.write(dest, {"x": np.full(10, 1)}, shard_size=64)
    (work / "overwrite.py").write_text(WRITE)
    return dest


def _hidden(dest: Path) -> list[str]:
    return sorted(p.name for p in dest.parent.iterdir() if p.name.startswith(f".{dest.name}."))


def test_overwrite_killed_between_two_renames_is_recovered_on_open(work):
    """Item 11, two-step swap: killed with the old store hidden and the new one not yet in place."""
    dest = _old_store(work)
    env = _env(work, FAULT_TWO_STEP="1")
    _kill(_start_paused([sys.executable, "overwrite.py", str(dest), "2"], work, env, "renamed-once"))
    assert not dest.exists() and len(_hidden(dest)) == 2  # the state the kill left
    ds = stoker.open(dest, verify=True)  # recovered: the complete new store is moved into place
    assert ds[:]["x"].tolist() == [2] * 10
    stoker.write(dest, {"x": np.full(10, 3)}, overwrite=True)  # the next write sweeps the leftovers
    assert _hidden(dest) == [] and stoker.open(dest)[:]["x"].tolist() == [3] * 10


def test_overwrite_killed_after_the_exchange_keeps_a_store(work):
    """Item 11, atomic swap: killed right after it, the destination is the new store; the old one is swept later."""
    dest = _old_store(work)
    cmd = [sys.executable, str(PAUSE_AT), "between-renames", "overwrite.py", str(dest), "2"]
    _kill(_start_paused(cmd, work, _env(work), "paused: between-renames"))
    assert stoker.open(dest, verify=True)[:]["x"].tolist() == [2] * 10
    assert len(_hidden(dest)) == 1  # the old store, hidden under the killed writer's pid
    stoker.write(dest, {"x": np.full(10, 3)}, overwrite=True)
    assert _hidden(dest) == [] and stoker.open(dest)[:]["x"].tolist() == [3] * 10
