"""One loader per configuration kept running for many epochs: does anything grow?

    python benchmarks/soak.py [--minutes 30] [--every 60] [--configs threads,processes,...] [--out results/soak]

Each configuration runs in its own process (so each measures only itself): it makes small data,
builds one loader, and reads epoch after epoch for ``--minutes`` beside a training-like step
(``--step-ms`` of small torch ops per batch). About every ``--every`` seconds (at the middle of
the next epoch, where worker processes are up, so samples compare like with like; ``--every 0``:
every epoch) it records over
the process tree (``stoker.pipeline.memory``): PSS and USS, open file descriptors, threads, this
consumer's ``/dev/shm`` entries (``stoker_<pid>_*``) and the size of the loader's cache directory
(the text id cache's spill files, the remote store's shard cache). Every epoch it checksums the
rows it saw (order-independent: the row ids, labels or token ids summed and hashed).

Pass: after a warm-up (``--warmup``: a quarter of the epochs run by default, at least the first),
every sample of anonymous + shared-memory PSS (``owned``: the heap, the batch slots, the id cache)
within the warm-up samples' range widened by ``--tolerance`` (2 %) and ``--floor-mib`` (4 MiB: a
batch more or less in flight moves a small loader by more than 2 %), the band printed; open fds,
threads and ``/dev/shm`` entries exactly equal at every epoch end after the warm-up, read once they
settle (:func:`settled`: downloads and worker exits of the epoch done; the mid-epoch figures, which
count work in flight, are printed beside them); and every epoch's checksum equal to the first. The
whole PSS and the USS are sampled and drawn too, but not judged: PSS's mapped-file part (shared
libraries such as libtorch) moves with the other processes on the machine that map the same files,
and the USS of forked workers is a few MiB (their pages are shared with the parent until written),
so a batch in flight moves it by more than 2 %.
Written: ``<out>-<config>.json`` with the samples, ``<out>-<config>.png`` (one panel per series,
with matplotlib), and a verdict table on stdout; exit status 1 when a configuration fails.

Configurations: ``threads`` (a store, 2 worker threads), ``processes`` (worker processes started
each epoch), ``persistent`` (worker processes kept across epochs), ``text`` (texts tokenized on
the fly, length-bucketed, the id cache spilled to a file), ``images`` (JPEG files decoded with
RandomResizedCrop + flip), ``remote`` (a store on a loopback S3 server, moto's, read through a
cache smaller than the store; skipped where moto or s3fs is missing). ``leak`` (not among the
defaults) checks the pass rule itself: ``threads`` keeping a copy of every batch (16 KiB) and one
open file per epoch; it must fail.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

CONFIGS = ("threads", "processes", "persistent", "text", "images", "remote")
FLAT = ("fds", "threads", "shm")  # must not move at all after the first epoch
GROWTH = ("owned",)  # may move by --tolerance after the first epoch


# -- measuring ------------------------------------------------------------------------------------
def _count(path: str) -> int:
    try:
        return len(os.listdir(path))
    except OSError:
        return 0


def _threads(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("Threads:")), 0)
    except OSError:
        return 0


def du(path: str | None) -> int:
    """Bytes of the files under ``path`` (0 for none)."""
    if not path or not os.path.isdir(path):
        return 0
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def counters() -> dict[str, int]:
    """Open fds and threads over the process tree, and this consumer's ``/dev/shm`` entries."""
    from stoker.pipeline.memory import descendants

    pids = [os.getpid(), *descendants(os.getpid())]
    return {
        "fds": sum(_count(f"/proc/{p}/fd") for p in pids),
        "threads": sum(_threads(p) for p in pids),
        "shm": sum(1 for name in os.listdir("/dev/shm") if name.startswith(f"stoker_{os.getpid()}_")),
    }


def settled(t0: float, epoch: int, wait: float = 2.0) -> dict[str, Any]:
    """:func:`counters` at the end of an epoch once they stop moving (the same three reads 20 ms
    apart, or ``wait`` seconds): downloads, reads and worker exits of the epoch have finished, so
    what is left open is what the loader keeps, not what it was doing."""
    reads = [counters()]
    end = time.perf_counter() + wait
    while time.perf_counter() < end and not (len(reads) >= 3 and reads[-1] == reads[-2] == reads[-3]):
        time.sleep(0.02)
        reads.append(counters())
    return {"t": time.perf_counter() - t0, "epoch": epoch, **reads[-1]}


def sample(t0: float, epoch: int, cache_dir: str | None) -> dict[str, Any]:
    from stoker.pipeline.memory import tree_memory

    mem = tree_memory()
    return {
        "t": time.perf_counter() - t0,
        "epoch": epoch,
        "pss": mem.pss,
        "uss": mem.uss,
        "rss": mem.rss,
        "owned": mem.pss_anon + mem.pss_shmem,
        "processes": mem.processes,
        **counters(),
        "cache_bytes": du(cache_dir),
    }


class Checksum:
    """An order-independent checksum of the rows of one epoch: a sum of int64 values and a count."""

    def __init__(self) -> None:
        self.total, self.rows = 0, 0

    def add(self, values: Any, rows: int) -> None:
        self.total += int(np.asarray(values, dtype=np.int64).sum())
        self.rows += rows

    def value(self) -> str:
        return f"{self.rows}:{zlib.crc32(str(self.total).encode()):08x}"


# -- configurations: (loader, checksum of one batch, cache directory) --------------------------------
def _store(tmp: Path, rows: int) -> Any:
    import stoker

    rng = np.random.default_rng(0)
    data = {"id": np.arange(rows, dtype=np.int64), "x": rng.integers(0, 2**20, size=(rows, 64), dtype=np.int32)}
    stoker.write(tmp / "store", data, shard_size="1MB")
    return stoker.open(tmp / "store")


def _rows_of(batch: Any) -> tuple[Any, int]:
    ids = batch["id"].numpy()
    return ids * 1_000_003 + batch["x"].numpy().sum(axis=1, dtype=np.int64), len(ids)


def build(config: str, tmp: Path, rows: int, s3: Any) -> tuple[Any, Any, Callable[[], str | None]]:
    """The loader of ``config``, the checksum values of one of its batches, and where its cache directory is."""
    import stoker

    if config == "leak":  # the pass rule's own check: threads, plus a copy of every batch and an fd per epoch kept
        kept: list[Any] = []
        loader = stoker.Loader(_store(tmp, rows), batch_size=64, shuffle=True, num_workers=2, engine="threads")

        def leaky(batch: Any) -> tuple[Any, int]:
            kept.append(batch["x"].numpy().copy())
            if len(kept) % len(loader) == 0:
                kept.append(open(os.devnull))  # noqa: SIM115 - kept open on purpose
            return _rows_of(batch)

        return loader, leaky, lambda: None
    if config in ("threads", "processes", "persistent"):
        engine = "threads" if config == "threads" else "processes"
        loader = stoker.Loader(
            _store(tmp, rows),
            batch_size=64,
            shuffle=True,
            num_workers=2,
            engine=engine,
            persistent_workers=config == "persistent",
        )
        return loader, _rows_of, lambda: None
    if config == "text":
        import stoker.text

        os.environ["STOKER_TEXT_CACHE_MEMORY"] = "0"  # the ids spill to a file: its size is sampled too
        rng = np.random.default_rng(0)
        words = ["the", "loader", "keeps", "feeding", "a", "hungry", "gpu", "for", "days", "without", "growing"]
        texts = [" ".join(rng.choice(words, size=int(rng.integers(3, 40)))) for _ in range(rows)]
        loader = stoker.text.Loader(texts, batch_size=32, max_length=64, shuffle=True)
        cache = loader.source.rows.cache

        def tokens(batch: Any) -> tuple[Any, int]:
            ids = batch["input_ids"]
            return (ids * batch["attention_mask"]).sum(dim=1).numpy(), len(ids)

        return loader, tokens, lambda: cache.spill_dir
    if config == "images":
        from PIL import Image

        import stoker.vision

        rng = np.random.default_rng(0)
        for i in range(min(rows, 256)):
            folder = tmp / "photos" / f"class{i % 4}"
            folder.mkdir(parents=True, exist_ok=True)
            pixels = rng.integers(0, 255, size=(96, 128, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / f"{i}.jpg", quality=85)
        source = stoker.vision.ImageSource(tmp / "photos", stoker.vision.train_transforms(64))
        loader = stoker.Loader(source, batch_size=32, shuffle=True, num_workers=2)
        return loader, lambda b: (b["label"].numpy(), len(b["label"])), lambda: None
    if config == "remote":
        url = f"s3://{s3['bucket']}/store"
        rng = np.random.default_rng(0)
        data = {"id": np.arange(rows, dtype=np.int64), "x": rng.integers(0, 2**20, size=(rows, 64), dtype=np.int32)}
        stoker.write(url, data, shard_size="256KB")
        size = rows * (8 + 64 * 4)
        cache = tmp / "cache"
        ds = stoker.open(url, cache_dir=cache, cache_limit=max(size // 3, 2**20))
        return stoker.Loader(ds, batch_size=64, shuffle=True, num_workers=2), _rows_of, lambda: str(cache)
    raise SystemExit(f"unknown configuration {config!r}; choose from {', '.join(CONFIGS)}")


def start_s3() -> Any:
    """A moto S3 server on a loopback port with a bucket, in this process (outside the measured
    process tree: its connections and threads are not the loader's); the environment reaches it."""
    import socket

    import boto3
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {
        "STOKER_SOAK_BUCKET": "soak",
        "AWS_ACCESS_KEY_ID": "soakkey",
        "AWS_SECRET_ACCESS_KEY": "soak-secret",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    os.environ.update(env)
    boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"]).create_bucket(Bucket="soak")
    return server


def step(ms: float) -> None:
    """A training-like step: small torch ops (each takes and drops the GIL) for ``ms`` milliseconds."""
    import torch

    a = torch.ones(64, 64)
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        a = torch.tanh(a @ a * 0.01)


def soak(config: str, minutes: float, every: float, step_ms: float, rows: int) -> dict[str, Any]:
    """Run ``config`` for ``minutes``; its samples and per-epoch checksums."""
    import torch

    torch.set_num_threads(1)
    s3 = {"bucket": os.environ.get("STOKER_SOAK_BUCKET", "")}  # the remote configuration's (main() serves it)
    with tempfile.TemporaryDirectory(prefix="stoker-soak-") as tmp:
        loader, rows_of, cache_dir = build(config, Path(tmp), rows, s3)
        t0 = time.perf_counter()
        samples, ends, sums, epoch, due = [], [], [], 0, 0.0
        while True:
            check, n = Checksum(), len(loader)
            for i, batch in enumerate(loader):
                values, count = rows_of(batch)
                check.add(values, count)
                step(step_ms)
                if i == n // 2 and time.perf_counter() - t0 >= due:
                    samples.append(sample(t0, epoch, cache_dir()))
                    due = samples[-1]["t"] + every
            sums.append(check.value())
            ends.append(settled(t0, epoch))
            epoch += 1
            if time.perf_counter() - t0 >= minutes * 60 and epoch >= 4:
                break
        loader.close()
    return {"config": config, "epochs": epoch, "samples": samples, "ends": ends, "checksums": sums}


# -- verdict and plot ----------------------------------------------------------------------------------
def verdict(run: dict[str, Any], tolerance: float, floor: int, warmup: int = 1) -> list[str]:
    """What failed (empty: passed). Memory: every sample after the ``warmup`` epochs within
    ``tolerance`` of the warm-up samples' range, plus ``floor`` bytes (:func:`band`); fds, threads and
    shm entries: equal at every settled epoch end after the warm-up; checksums: equal every epoch."""
    after = [s for s in run["samples"] if s["epoch"] >= warmup]
    ends = [e for e in run["ends"] if e["epoch"] >= warmup]
    bad = []
    if len(after) < 2 or not any(s["epoch"] < warmup for s in run["samples"]):
        bad.append(
            f"{len(after)} sample(s) after the warm-up, and the warm-up needs one: run longer or sample more often"
        )
    else:
        for key in GROWTH:
            low, high = band(run, key, tolerance, floor, warmup)
            out = [s[key] for s in after if not low <= s[key] <= high]
            if out:
                bad.append(
                    f"{key} left {low / 2**20:.1f}-{high / 2**20:.1f} MiB: {max(out, key=lambda v: abs(v - high)) / 2**20:.1f}"
                )
    for key in FLAT:
        seen = sorted({e[key] for e in ends})
        if len(seen) > 1:
            bad.append(f"{key} not flat at epoch ends: {seen}")
    if len(set(run["checksums"])) > 1:
        bad.append(f"epochs saw different rows: checksums {sorted(set(run['checksums']))}")
    return bad


def warmup_epochs(run: dict[str, Any], warmup: float) -> int:
    """The warm-up in epochs: ``warmup`` epochs (>= 1) or that share of the epochs run, at least one."""
    return max(1, int(warmup if warmup >= 1 else run["epochs"] * warmup))


def band(run: dict[str, Any], key: str, tolerance: float, floor: int, warmup: int = 1) -> tuple[float, float]:
    """Where ``key`` may be after the warm-up: the warm-up samples' lowest - ``tolerance`` - ``floor``
    to their highest + ``tolerance`` + ``floor`` (a batch more or less in flight moves a small
    loader's memory by more than 2 %; the floor keeps that from failing it, and is printed)."""
    warm = [s[key] for s in run["samples"] if s["epoch"] < warmup]
    if not warm:
        return 0.0, 0.0  # verdict() fails such a run
    return min(warm) * (1 - tolerance) - floor, max(warm) * (1 + tolerance) + floor


def plot(run: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = [("pss", "PSS MiB", 2**20), ("owned", "anon+shm PSS MiB", 2**20), ("uss", "USS MiB", 2**20)]
    series += [("fds", "open fds", 1)]
    series += [("threads", "threads", 1), ("shm", "/dev/shm entries", 1), ("cache_bytes", "cache dir MiB", 2**20)]
    fig, axes = plt.subplots(len(series), 1, figsize=(7, 1.6 * len(series)), sharex=True)
    t = [s["t"] / 60 for s in run["samples"]]
    for ax, (key, label, scale) in zip(axes, series):
        ax.plot(t, [s[key] / scale for s in run["samples"]], marker=".")
        ax.set_ylabel(label, fontsize=8)
        ax.tick_params(labelsize=8)
    axes[0].set_title(f"soak: {run['config']}, {run['epochs']} epochs", fontsize=9)
    axes[-1].set_xlabel("minutes", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30.0, help="per configuration")
    ap.add_argument("--every", type=float, default=60.0, help="seconds between samples")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--rows", type=int, default=4096, help="rows per epoch (images: at most 256 files)")
    ap.add_argument("--step-ms", type=float, default=5.0, help="the training-like step per batch")
    ap.add_argument("--tolerance", type=float, default=0.02, help="PSS may move this share after the first epoch")
    ap.add_argument("--floor-mib", type=float, default=4.0, help="and this many MiB besides (see band())")
    ap.add_argument(
        "--warmup",
        type=float,
        default=0.25,
        help="epochs of warm-up: a count (>= 1), or a share of the epochs run (< 1); at least the first epoch",
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="configurations run at once (each in its own process tree; they share the CPUs)",
    )
    ap.add_argument("--out", default="results/soak")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: run this configuration here, print JSON
    args = ap.parse_args()
    if args.one:
        print(json.dumps(soak(args.one, args.minutes, args.every, args.step_ms, args.rows)), flush=True)
        return 0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    print(
        f"after the warm-up ({args.warmup:g} {'epochs' if args.warmup >= 1 else 'of the epochs'}, at least one), "
        f"anon+shm PSS must stay within the warm-up samples' range -/+ {args.tolerance:.0%} -/+ {args.floor_mib:g} MiB "
        "(the band); fds, threads and /dev/shm entries equal at every epoch end (read once they settle; "
        "mid-epoch ranges shown for reference); every epoch's row checksum equal"
    )
    print(
        f"{'config':<11} {'epochs':>6} {'samples':>7} {'anon+shm MiB':>15} {'band MiB':>13} {'fds':>9} {'threads':>9} "
        f"{'shm':>5} {'mid-epoch fds/threads':>22}  verdict"
    )
    configs = args.configs.split(",")
    if "remote" in configs and not _has("moto.server", "s3fs", "boto3"):
        configs.remove("remote")
        print(f"{'remote':<11} skipped: needs moto[server], s3fs and boto3 (the dev extra)")

    def run_one(config: str) -> subprocess.CompletedProcess[str]:
        server = start_s3() if config == "remote" else None
        cmd = [sys.executable, __file__, "--one", config, *_passed(args)]
        try:
            return subprocess.run(cmd, capture_output=True, text=True)
        finally:
            if server is not None:
                server.stop()

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        runs = zip(configs, pool.map(run_one, configs))  # in order, each as soon as it and those before are done
        failed = any([_judge(config, done, args, out) for config, done in runs])
    return 1 if failed else 0


def _judge(config: str, done: subprocess.CompletedProcess[str], args: argparse.Namespace, out: Path) -> bool:
    """Judge and print one configuration's run; True when it failed."""
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        print(f"{config:<11} FAILED to run (exit {done.returncode}): {done.stderr.strip()[-400:]}")
        return True
    run = json.loads(lines[-1])
    floor = int(args.floor_mib * 2**20)
    warmup = warmup_epochs(run, args.warmup)
    bad = verdict(run, args.tolerance, floor, warmup)
    run["verdict"] = bad or ["pass"]
    Path(f"{out}-{config}.json").write_text(json.dumps(run, indent=1))
    drawn = plot(run, Path(f"{out}-{config}.png"))
    after = [s for s in run["samples"] if s["epoch"] >= warmup] or run["samples"]
    ends = [e for e in run["ends"] if e["epoch"] >= warmup] or run["ends"]
    low, high = band(run, "owned", args.tolerance, floor, warmup)
    mid = f"{_span(after, 'fds')} / {_span(after, 'threads')}"
    print(
        f"{config:<11} {run['epochs']:>6} {len(run['samples']):>7} {_span(after, 'owned', 2**20):>15} "
        f"{low / 2**20:>6.1f}-{high / 2**20:<6.1f} {_span(ends, 'fds'):>9} {_span(ends, 'threads'):>9} "
        f"{_span(ends, 'shm'):>5} {mid:>22}  {'; '.join(run['verdict'])}" + ("" if drawn else " (no plot)")
    )
    return bool(bad)


def _span(samples: list[dict[str, Any]], key: str, scale: int = 1) -> str:
    low, high = min(s[key] for s in samples) / scale, max(s[key] for s in samples) / scale
    return f"{low:.1f}-{high:.1f}" if scale > 1 else f"{low:.0f}-{high:.0f}"


def _passed(args: argparse.Namespace) -> list[str]:
    return [
        f"--minutes={args.minutes}",
        f"--every={args.every}",
        f"--rows={args.rows}",
        f"--step-ms={args.step_ms}",
    ]


def _has(*modules: str) -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m.split(".")[0]) is not None for m in modules) and all(
        importlib.util.find_spec(m) is not None for m in modules
    )


if __name__ == "__main__":
    sys.exit(main())
