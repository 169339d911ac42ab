"""Process workers: stale segments of dead consumers are swept."""

import os
import subprocess
import sys

from stoker.pipeline.processes import sweep_stale_segments


def test_sweep_removes_only_segments_of_dead_processes(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    (tmp_path / f"stoker_{dead}_abcd_1_2").write_bytes(b"x")
    (tmp_path / f"stoker_{os.getpid()}_abcd_1_2").write_bytes(b"x")
    (tmp_path / "stoker_notapid_x").write_bytes(b"x")
    (tmp_path / "other_1_2").write_bytes(b"x")
    assert sweep_stale_segments(str(tmp_path)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"stoker_{os.getpid()}_abcd_1_2", "stoker_notapid_x", "other_1_2"]
    )


def _running(pid):
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_killed_consumer_leaves_nothing_after_the_next_pool(tmp_path):
    """SIGKILL the consumer mid-epoch: its workers die with it, the next pool sweeps what it left."""
    import time

    import torch

    import stoker

    script = tmp_path / "victim.py"
    script.write_text(
        "import multiprocessing, os, signal, torch, stoker\n"
        "class D(torch.utils.data.Dataset):\n"
        "    def __len__(self): return 10_000\n"
        "    def __getitem__(self, i): return torch.zeros(10_000)\n"
        "for i, b in enumerate(stoker.Loader(D(), batch_size=64, num_workers=2, prefetch_factor=4)):\n"
        "    if i == 3:\n"
        "        print(*(p.pid for p in multiprocessing.active_children()), flush=True)\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    workers = proc.stdout.read().split()
    assert proc.wait(timeout=600) == -9 and workers
    deadline = time.monotonic() + 60  # a bound for workers that never die, not a speed
    while any(map(_running, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)  # the orphaned workers receive their death signal
    assert not any(map(_running, workers)), "the workers outlived the consumer"

    class Tiny(torch.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return i

    list(stoker.Loader(Tiny(), batch_size=2, num_workers=1))  # a new pool sweeps stale segments
    # the victim's own segments: other processes on this machine may be dying with theirs right now
    assert not [f for f in os.listdir("/dev/shm") if f.startswith(f"stoker_{proc.pid}_")]


def test_a_worker_death_is_named_by_its_signal_and_oom_is_said_only_on_evidence(monkeypatch):
    """Issue 15 item 5: every death used to be put down to 'the out-of-memory killer'."""
    from stoker.pipeline import deaths as processes

    monkeypatch.setattr(processes, "oom_kills", lambda: 3)
    assert "out-of-memory killer ended 1" in processes.exit_words(-9, oom_before=2)
    unlikely = processes.exit_words(-9, oom_before=3)
    assert "SIGKILL" in unlikely and "unlikely" in unlikely
    monkeypatch.setattr(processes, "oom_kills", lambda: None)
    assert "one possible cause" in processes.exit_words(-9, oom_before=None)
    assert "SIGSEGV" in processes.exit_words(-11) and "native code" in processes.exit_words(-11)
    assert "code 3" in processes.exit_words(3)
