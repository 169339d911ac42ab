"""Real torchrun launches (gloo, CPU, loopback): exact rank splits, elastic resume, ranks that must agree.

Each launch runs ``tests/dist/worker.py`` on every rank (``python -m torch.distributed.run``, a
free port per launch, a timeout on every child) on a tiny store whose ``label`` column is the
row number; the test then checks the rows every rank saw against the epoch's global order.
Launches are few and combine several checks, since each costs seconds of interpreter and torch
start-up per rank.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import stoker
import stoker.text
from stoker.pipeline.sampler import Sampler

pytestmark = pytest.mark.dist

WORKER = Path(__file__).with_name("worker.py")
TIMEOUT = 150  # seconds for one launch, start-up included, on a loaded 2-core machine
N = 1200  # rows: a multiple of 2, 3 and 4, so fresh epochs split exactly
OPTIONS = dict(batch_size=10, shuffle="block", block_size=64, window=2, seed=5)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )


def wait(procs: list[subprocess.Popen], what: str) -> None:
    """Wait for every launch; on a timeout kill their process groups; fail showing their output."""
    outputs, failed = [], False
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
            out, err = proc.communicate()
            err += f"\n[killed after {TIMEOUT} s]"
        failed |= proc.returncode != 0
        outputs.append(f"--- exit {proc.returncode}\nstdout:\n{out[-4000:]}\nstderr:\n{err[-8000:]}")
    if failed:
        pytest.fail(f"{what} failed:\n" + "\n".join(outputs), pytrace=False)


def env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def plan_file(tmp: Path, tag: str, steps: list[dict], store: Path) -> Path:
    plan = {"tag": tag, "out": str(tmp), "store": str(store), "options": OPTIONS, "steps": steps}
    path = tmp / f"{tag}.plan.json"
    path.write_text(json.dumps(plan))
    return path


def torchrun(tmp: Path, tag: str, nproc: int, steps: list[dict], store: Path) -> list[dict]:
    """One single-node launch of ``nproc`` ranks; each rank's results, by rank."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(nproc)]
    cmd += ["--master_addr", "127.0.0.1", "--master_port", str(free_port()), "--max_restarts", "0"]
    wait([run([*cmd, str(WORKER), str(plan_file(tmp, tag, steps, store))], env())], f"torchrun {tag} ({nproc} ranks)")
    return [json.loads((tmp / f"{tag}.rank{r}.json").read_text()) for r in range(nproc)]


def rows(results: list[dict], step: str) -> list[int]:
    return [x for r in results for batch in r[step] for x in batch]


def batch_counts(results: list[dict], step: str) -> set[int]:
    return {len(r[step]) for r in results}


def text_order(epoch: int) -> list[list[int]]:
    """The bucketed text loader's batches of ``epoch`` in the epoch's order (one rank reads them all)."""
    sys.path.insert(0, str(WORKER.parent))
    from worker import TEXT_OPTIONS, text_rows

    loader = stoker.text.Loader(text_rows(), rank=0, world_size=1, **TEXT_OPTIONS)
    loader.set_epoch(epoch)
    return [b["labels"].tolist() for b in loader]


def text_elastic(head: list[dict], tail: list[dict], consumed: int) -> None:
    """Head and resumed tail of the text loader: every example once, the new ranks' padding aside."""
    order = text_order(2)
    left, ranks = len(order) - consumed, len(tail)
    assert batch_counts(tail, "text_tail") == {-(-left // ranks)}
    padded = Counter(x for b in order[: -left % ranks] for x in b)  # uneven="pad": the epoch's first batches again
    assert Counter(rows(head, "text_head") + rows(tail, "text_tail")) == Counter(range(301)) + padded


def order(epoch: int) -> np.ndarray:
    kw = {k: OPTIONS[k] for k in ("seed", "block_size", "window")}
    return Sampler(N, "block", **kw).global_order(epoch)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("dist")
    good = stoker.write(root / "store", {"label": np.arange(N, dtype=np.int64)}, shard_size=300)
    stale = stoker.write(root / "stale", {"label": np.arange(N - 1, dtype=np.int64)}, shard_size=300)
    return Path(good), Path(stale)


def test_four_ranks_then_resumed_on_two_and_three(tmp_path, stores):
    store, _ = stores
    everything = Counter(range(N))
    four = torchrun(
        tmp_path,
        "four",
        4,
        [
            {"kind": "init"},
            {"kind": "epoch", "name": "e0", "epoch": 0},
            {"kind": "epoch", "name": "e1", "epoch": 1},
            {"kind": "head", "epoch": 2, "batches": 7},
            {"kind": "resume", "name": "tail", "state": str(tmp_path / "four.state0.json")},  # rank 0's state
            {"kind": "text_head", "epoch": 2, "batches": 5},
            {"kind": "text_resume", "name": "text_tail", "state": str(tmp_path / "four.textstate0.json")},
        ],
        store,
    )
    for step in ("e0", "e1"):  # every row once per epoch, as many batches on every rank
        assert Counter(rows(four, step)) == everything
        assert batch_counts(four, step) == {30}
    assert rows(four, "e0") != rows(four, "e1")
    # every rank resumed rank 0's state (was refused: 'rank: saved 0, now 1'), every row once
    assert Counter(rows(four, "head") + rows(four, "tail")) == everything
    assert batch_counts(four, "tail") == {23}

    text_elastic(four, four, 5 * 4)  # the bucketed text loader: every rank resumes rank 0's state
    state = str(tmp_path / "four.state0.json")
    text = {"kind": "text_resume", "name": "text_tail", "state": str(tmp_path / "four.textstate0.json")}
    two = torchrun(
        tmp_path, "two", 2, [{"kind": "init"}, {"kind": "resume", "name": "tail", "state": state}, text], store
    )
    # 4 -> 2: 280 rows were read by 4 ranks, the other 920 by 2
    assert Counter(rows(four, "head") + rows(two, "tail")) == everything
    assert batch_counts(two, "tail") == {46}
    text_elastic(four, two, 5 * 4)  # 4 -> 2

    three = torchrun(
        tmp_path, "three", 3, [{"kind": "init"}, {"kind": "resume", "name": "tail", "state": state}, text], store
    )
    # 4 -> 3: 920 rows left do not split over 3 ranks: uneven="pad" repeats the epoch's first row once
    assert Counter(rows(four, "head") + rows(three, "tail")) == everything + Counter([int(order(2)[0])])
    assert batch_counts(three, "tail") == {31}
    text_elastic(four, three, 5 * 4)  # 4 -> 3


def test_ranks_that_do_not_agree_fail_loudly(tmp_path, stores):
    store, stale = stores
    steps = [{"kind": "unsplit"}, {"kind": "init"}, {"kind": "stale", "rank": 1, "store": str(stale)}]
    two = torchrun(tmp_path, "two", 2, steps, store)
    for r in two:  # a loader built before init_process_group under torchrun is refused (was: all rows on every rank)
        assert r["unsplit"].startswith("ConfigError") and "WORLD_SIZE=2" in r["unsplit"], r["unsplit"]
        assert "init_process_group" in r["unsplit"]
    for r in two:  # a stale copy of the store fails every rank, naming the rank and what differs (was: silent)
        assert r["stale"].startswith("ConfigError") and "rank 1: rows 1199 (rank 0: 1200)" in r["stale"], r["stale"]


def test_two_ranks_resumed_on_four_and_rerun(tmp_path, stores):
    store, _ = stores
    steps = [{"kind": "init"}, {"kind": "epoch", "name": "e0", "epoch": 0}, {"kind": "head", "epoch": 1, "batches": 13}]
    text = [{"kind": "text_head", "epoch": 2, "batches": 7}]
    two = torchrun(tmp_path, "two", 2, steps + text, store)
    assert Counter(rows(two, "e0")) == Counter(range(N)) and batch_counts(two, "e0") == {60}
    # 2 -> 4 from rank 1's state (any rank's state is the same position)
    resume = [{"kind": "init"}, {"kind": "resume", "name": "tail", "state": str(tmp_path / "two.state1.json")}]
    resume.append({"kind": "text_resume", "name": "text_tail", "state": str(tmp_path / "two.textstate1.json")})
    four = torchrun(tmp_path, "four", 4, resume, store)
    assert Counter(rows(two, "head") + rows(four, "tail")) == Counter(range(N))
    assert batch_counts(four, "tail") == {24}
    text_elastic(two, four, 7 * 2)  # the text loader, 2 -> 4
    again = torchrun(tmp_path, "again", 2, steps[:2], store)  # a rerun gives every rank the same batches
    assert [r["e0"] for r in again] == [r["e0"] for r in two]


def test_two_node_groups_on_localhost(tmp_path, stores):
    store, _ = stores
    plan = plan_file(tmp_path, "nodes", [{"kind": "init"}, {"kind": "epoch", "name": "e0", "epoch": 0}], store)
    endpoint = f"127.0.0.1:{free_port()}"
    procs = []
    for node in range(2):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank", str(node)]
        cmd += ["--nproc_per_node", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint]
        cmd += ["--rdzv_id", "stoker-dist-test", "--rdzv_conf", "join_timeout=60", "--max_restarts", "0"]
        procs.append(run([*cmd, str(WORKER), str(plan)], env()))
    wait(procs, "two torchrun node groups")
    results = [json.loads((tmp_path / f"nodes.rank{r}.json").read_text()) for r in range(2)]
    assert [r["world"] for r in results] == [2, 2]
    assert Counter(rows(results, "e0")) == Counter(range(N)) and batch_counts(results, "e0") == {60}
