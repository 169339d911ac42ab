"""``stoker doctor`` names each stall class in a small script that has it, and nothing in a clean one of the same shape.

Each script makes its own data; the faulty and clean variants differ by one argument. The
assertions are on counts and structure (batches per worker, worker processes started, strings in
a batch); the memory and start-up classes compare against thresholds far from the clean runs.
"""

import json
import re
import subprocess
import sys
import textwrap

import pytest

HANG_S = 600  # a bound for a hung run, not a speed


def doctor(tmp_path, source, *args):
    """Run ``source`` as train.py under ``stoker doctor --json``; the process and the report."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source))
    out = tmp_path / "report"
    cmd = [sys.executable, "-m", "stoker.cli.main", "doctor", "--out", str(out), "--interval", "0.1", "--no-html"]
    cmd += ["--", sys.executable, str(script), *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_S, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, json.loads((out / "report.json").read_text())


def named(report):
    """The stalls named in the script's own processes (``shm`` counts /dev/shm machine-wide: other tenants')."""
    return [s for s in report["stalls"] if s["kind"] != "shm"]


def stall_of(tmp_path, source, arg, kind, clean):
    """Run the script with ``arg``: a clean variant names no stall (None); a faulty one names ``kind`` once."""
    proc, report = doctor(tmp_path, source, arg)
    if clean:
        assert not named(report), report["stalls"]
        return None, proc, report
    (stall,) = [s for s in report["stalls"] if s["kind"] == kind]
    return stall, proc, report


SHARDS = """
import sys, torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

class Shards(IterableDataset):
    def __init__(self, shards):
        self.shards = [range(s * 64, (s + 1) * 64) for s in range(shards)]
    def __iter__(self):
        info = get_worker_info()
        for shard in self.shards[info.id :: info.num_workers]:
            yield from shard

loader = DataLoader(Shards(int(sys.argv[1])), batch_size=8, num_workers=3)
for batch in loader:
    batch.sum()
"""


@pytest.mark.parametrize("shards", [1, 3])
def test_idle_workers_of_an_iterable_dataset_with_fewer_shards_than_workers(tmp_path, shards):
    # with 3 shards, one per worker: each makes 8 batches, nothing to say
    stall, proc, report = stall_of(tmp_path, SHARDS, shards, "idle_workers", clean=shards == 3)
    if stall is None:
        return
    assert "2 of 3 workers produced no batch" in stall["verdict"]
    assert "worker 0: 8, worker 1: 0, worker 2: 0" in stall["verdict"]
    assert "get_worker_info" in stall["torch_fix"] and "stoker.Loader" in stall["stoker_fix"]
    assert "idle workers" in proc.stdout
    cost = report["resources"]["doctor"]  # what the doctor itself cost, said in the report
    assert cost["events"] >= 24 and cost["sampler_cpu_s"] >= 0 and "the doctor itself cost" in proc.stdout


OBJECTS = """
import sys, time, numpy as np, torch
from torch.utils.data import DataLoader, Dataset

N = 500_000

class Records(Dataset):
    def __init__(self, kind):
        self.rows = [{"id": i, "text": f"sentence number {i} of the corpus"} for i in range(N)] if kind == "objects" else None
        self.ids = np.arange(N)
    def __len__(self):
        return N
    def __getitem__(self, i):
        if self.rows is not None:
            row = self.rows[i]
            return row["id"] + len(row["text"])
        return int(self.ids[i])

loader = DataLoader(Records(sys.argv[1]), batch_size=1000, shuffle=True, num_workers=2)
for batch in loader:
    time.sleep(0.01)
"""


@pytest.mark.parametrize("kind", ["objects", "arrays"])
def test_memory_that_grows_in_workers_copy_on_access_of_python_objects(tmp_path, kind):
    # numpy rows stay shared pages: the workers' private memory stays flat
    stall, proc, report = stall_of(tmp_path, OBJECTS, kind, "worker_memory", clean=kind == "arrays")
    if stall is None:
        return
    # every worker read twice or more grew (USS reads are spaced by their cost: a worker may get only one)
    assert re.search(r"([12]) of \1 worker processes grew their private memory", stall["verdict"])
    assert "numpy" in stall["torch_fix"] and "memory-mapped store" in stall["stoker_fix"]
    assert any(s.get("mem") for s in report["samples"])  # per-process USS/PSS sampled


STARTS = """
import sys, time, torch
from torch.utils.data import DataLoader, TensorDataset

def init(worker_id):
    time.sleep(float(sys.argv[1]))  # the per-worker set-up of a heavy Dataset: opening files, loading an index

loader = DataLoader(TensorDataset(torch.arange(256.0)), batch_size=16, num_workers=2, worker_init_fn=init)
for epoch in range(3):
    for (batch,) in loader:
        time.sleep(0.01)
"""


@pytest.mark.parametrize("setup_s", [0.0, 0.8])
def test_slow_epoch_starts_workers_forked_again_each_epoch(tmp_path, setup_s):
    stall, proc, report = stall_of(tmp_path, STARTS, setup_s, "slow_starts", clean=not setup_s)
    if stall is None:
        return
    assert "3 epoch starts" in stall["verdict"]
    assert "6 worker processes were started for num_workers=2" in stall["verdict"]  # counted: 2 per epoch
    assert "persistent_workers=True" in stall["torch_fix"] and "persistent_workers=True" in stall["stoker_fix"]


COLLATE = """
import sys, torch
from torch.utils.data import DataLoader, Dataset

class Seqs(Dataset):
    def __len__(self):
        return 12800
    def __getitem__(self, i):
        return torch.arange(1, 40 + i % 80)

def python_pad(seqs):  # one Python operation per token
    longest = max(len(s) for s in seqs)
    return torch.tensor([[int(x) for x in s.tolist()] + [0] * (longest - len(s)) for s in seqs])

def one_call(seqs):
    return torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)

loader = DataLoader(Seqs(), batch_size=64, collate_fn=python_pad if sys.argv[1] == "python" else one_call)
for batch in loader:
    batch.sum()
"""


@pytest.mark.parametrize("collate", ["python", "one_call"])
def test_collate_fn_padding_in_python(tmp_path, collate):
    stall, proc, report = stall_of(tmp_path, COLLATE, collate, "python_collate", clean=collate == "one_call")
    if stall is None:
        return
    assert (
        "python_pad takes" in stall["verdict"]
        and "over 200 batches" in stall["verdict"]
        and "the training loop's thread" in stall["verdict"]
    )
    assert "pad_sequence" in stall["torch_fix"]


TEXT = """
import sys, torch
from torch.utils.data import DataLoader, Dataset

LINES = [f"line {i} of a small corpus" for i in range(2048)]
VOCAB = {}

def ids(line):
    return torch.tensor([VOCAB.setdefault(w, len(VOCAB) + 1) for w in line.split()][:8])

class Lines(Dataset):
    def __init__(self, tokenize):
        self.tokenize = tokenize
    def __len__(self):
        return len(LINES)
    def __getitem__(self, i):
        return ids(LINES[i]) if self.tokenize else LINES[i]

tokenize = sys.argv[1] == "dataset"
for batch in DataLoader(Lines(tokenize), batch_size=32):
    x = batch if tokenize else torch.stack([ids(line) for line in batch])  # the loop's thread tokenizes
    x.sum()
"""


@pytest.mark.parametrize("where", ["loop", "dataset"])
def test_tokenization_in_the_training_loops_thread(tmp_path, where):
    stall, proc, report = stall_of(tmp_path, TEXT, where, "raw_text", clean=where == "dataset")
    if stall is None:
        return
    assert "batches hold Python strings (batch: 32 per batch)" in stall["verdict"]
    assert "stoker.text.Loader" in stall["stoker_fix"]


COPIES = """
import sys, torch
from torch.utils.data import DataLoader, TensorDataset

mode = sys.argv[1]  # "faulty" / "clean" on CUDA; "cpu": the faulty loop on the CPU
device = "cpu" if mode == "cpu" else "cuda"
clean = mode == "clean"
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = TensorDataset(torch.randn(64 * 48, 512), torch.randint(0, 10, (64 * 48,)))
for step, (x, y) in enumerate(DataLoader(data, batch_size=64, num_workers=1, pin_memory=clean)):
    x, y = x.to(device, non_blocking=clean), y.to(device, non_blocking=clean)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if not clean or step % 50 == 0:
        print(step, loss.item())
"""


def test_copies_and_syncs_of_a_cpu_loop_name_nothing(tmp_path):
    # .to(device) without non_blocking and .item() every step, on the CPU: no copy, no stream, nothing to name
    _, proc, report = stall_of(tmp_path, COPIES, "cpu", None, clean=True)
    assert report["loaders"] and not any(s["kind"] in ("copies", "syncs") for s in report["stalls"])


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["faulty", "clean"])
def test_copies_and_syncs_on_cuda(tmp_path, mode):
    _, proc, report = doctor(tmp_path, COPIES, mode)
    found = {s["kind"]: s for s in report["stalls"]}
    if mode == "clean":  # pinned batches copied with non_blocking=True, .item() every 50 steps
        assert "copies" not in found and "syncs" not in found, report["stalls"]
        return
    copies, syncs = found["copies"], found["syncs"]
    assert "steps watched" in copies["verdict"] and "2.0 copies" in copies["verdict"]
    assert "without non_blocking=True" in copies["verdict"] and "(pin_memory=False)" in copies["verdict"]
    assert "pin_memory=True" in copies["torch_fix"] and 'device="cuda"' in copies["stoker_fix"]
    assert "call .item() on a CUDA tensor" in syncs["verdict"]
