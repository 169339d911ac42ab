"""``stoker doctor -- torchrun ...``: every rank recorded, one report with a row per rank, one trace with a
process per rank, and the straggler named. Two ranks on CPU (gloo); in the faulty run one rank's
``__getitem__`` sleeps, in the clean run none does."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch.distributed")
HANG_S = 600  # a bound for a hung run, not a speed

TRAIN = """
import sys, time, torch, torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

dist.init_process_group("gloo")
rank = dist.get_rank()
slow = int(sys.argv[1])  # the rank whose data path is slow (-1: none)

class Rows(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        if rank == slow:
            time.sleep(0.02)  # a slower disk on this rank's node
        return torch.tensor([float(i)])

grad = torch.zeros(1)
for batch in DataLoader(Rows(), batch_size=8):
    dist.all_reduce(grad)  # every rank's step waits for the slowest rank
dist.destroy_process_group()
"""


def doctor_ranks(tmp_path, launcher, slow):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(TRAIN))
    out = tmp_path / "report"
    cmd = [sys.executable, "-m", "stoker.cli.main", "doctor", "--out", str(out), "--interval", "0.1", "--no-html"]
    cmd += ["--", *launcher, "--standalone", "--nproc_per_node", "2", str(script), str(slow)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_S, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, json.loads((out / "report.json").read_text()), json.loads((out / "trace.json").read_text())


TORCHRUN = str(Path(sys.executable).with_name("torchrun"))


def test_torchrun_two_ranks_one_slow_names_the_straggler(tmp_path):
    proc, report, trace = doctor_ranks(tmp_path, [TORCHRUN], slow=1)
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    assert [r["steps"] for r in report["ranks"]] == [8, 8]
    (late,) = [s for s in report["stalls"] if s["kind"] == "straggler_rank"]
    assert late["loader"] == "rank 1" and "straggler: rank 1 waits on data" in late["verdict"]
    assert "Rows.__getitem__" in late["verdict"]  # its slowest stage
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    pids = {r["pid"] for r in report["ranks"]}
    assert names == {f"rank {r['rank']} (pid {r['pid']})" for r in report["ranks"]} and len(pids) == 2
    assert "straggler: rank 1" in proc.stdout and "ranks" in proc.stdout


def test_python_m_torch_distributed_run_balanced_ranks_name_no_straggler(tmp_path):
    proc, report, _ = doctor_ranks(tmp_path, [sys.executable, "-m", "torch.distributed.run"], slow=-1)
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    assert [r["steps"] for r in report["ranks"]] == [8, 8]
    assert not [s for s in report["stalls"] if s["kind"] == "straggler_rank"], report["stalls"]
