"""Block order sized to memory and to a cache (issue 37), side by side in one run, ratios printed.

Local: a store ``--ratio`` times a memory cgroup's limit (``--limit`` MiB; 12 KiB rows by default),
one ``shuffle="block"`` epoch per run, each in a fresh process whose store pages were dropped from
the page cache first (cold):

  unlimited        no cgroup; block_size and window left to stoker (on this machine's RAM: the
                   defaults, 4096 x 16);
  limited, sized   in the cgroup; the sizes left to stoker, which reads the cgroup's limit;
  limited, old     in the cgroup; the old defaults forced (block_size=4096, window=16), unless
                   ``--skip-old`` (a run that thrashes: it may take minutes).

The cgroup is made inside this process's own memory cgroup (v1 ``memory.limit_in_bytes`` or v2
``memory.max``; root needed). The child joins it after its imports and before it builds the loader,
so the limit bounds the epoch and the loader sizes its window from it. Where no cgroup can be
made, ``--simulate`` sets ``STOKER_MEMORY_LIMIT`` instead: the sizes are those of the limit, but
nothing bounds the page cache, so the times say nothing about thrashing (the run says so).

Remote (``--remote``): a store on a moto server on loopback, read with a cache of a tenth of it;
one epoch with the sizes left to stoker and one with the old defaults; the bytes fetched over
the store's size.

    python benchmarks/bench_block_memory.py --limit 128 --ratio 4 --remote
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import stoker
from stoker.sources.mapped_file import drop_from_page_cache

OLD = {"block_size": 4096, "window": 16}


def write_store(path: Path, total: int, row_bytes: int) -> None:
    rows = total // row_bytes
    schema = {"x": stoker.Tensor("uint8", (row_bytes - 8,)), "i": stoker.Scalar("int64")}
    with stoker.StoreWriter(path, schema, shard_size="64MB") as w:
        for a in range(0, rows, 2048):
            n = min(2048, rows - a)
            w.add_batch({"x": np.full((n, row_bytes - 8), a % 251, np.uint8), "i": np.arange(a, a + n)})


def child(plan_path: str) -> None:
    """One epoch (run in a fresh process): join the cgroup, build the loader, read, write the result."""
    plan = json.loads(Path(plan_path).read_text())
    ds = stoker.open(plan["store"])
    if plan["procs"]:
        Path(plan["procs"]).write_text(str(os.getpid()))
    start = time.perf_counter()
    loader = stoker.Loader(ds, batch_size=64, shuffle="block", seed=1, num_workers=2, **plan["sizes"])
    rows = sum(len(b["i"]) for b in loader)
    out = {"seconds": time.perf_counter() - start, "rows": rows, "order": str(loader.block_order)}
    Path(plan["out"]).write_text(json.dumps(out))


class Cgroup:
    """A memory cgroup under this process's own, or the reason none can be made."""

    def __init__(self, limit: int) -> None:
        self.path: Path | None = None
        self.why = ""
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, rel = line.split(":", 2)
            if controllers == "" and Path("/sys/fs/cgroup/cgroup.controllers").exists():
                base, knob = Path("/sys/fs/cgroup"), "memory.max"
            elif "memory" in controllers.split(","):
                base, knob = Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes"
            else:
                continue
            path = base / rel.lstrip("/") / f"stoker-bench-{os.getpid()}"
            try:
                path.mkdir()
                (path / knob).write_text(str(limit))
                self.path = path
                return
            except OSError as exc:
                self.why += f"{path}: {exc.strerror}; "
                try:
                    path.rmdir()
                except OSError:
                    pass
        self.why = self.why or "no memory controller"

    def remove(self) -> None:
        """Remove the cgroup once the exited child's page cache is no longer charged to it (5 s at most)."""
        deadline = time.monotonic() + 5
        while self.path is not None and self.path.exists():
            try:
                self.path.rmdir()
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


def run(store: Path, tmp: Path, name: str, sizes: dict, procs: str | None, env: dict, timeout: float) -> dict:
    for shard in store.glob("*.arrow"):
        drop_from_page_cache(shard)
    plan = {"store": str(store), "sizes": sizes, "procs": procs, "out": str(tmp / f"{name}.json")}
    (tmp / f"{name}.plan.json").write_text(json.dumps(plan))
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(tmp / f"{name}.plan.json")],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"seconds": float("inf"), "rows": -1, "order": f"stopped after {timeout:.0f} s"}
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
    return json.loads((tmp / f"{name}.json").read_text())


def local(args: argparse.Namespace, tmp: Path) -> None:
    limit = args.limit * 2**20
    store = tmp / "store"
    write_store(store, args.ratio * limit, args.row_bytes)
    size = stoker.open(store).nbytes
    print(
        f"local: a store of {size / 2**20:.0f} MiB ({args.row_bytes} B rows), {size / limit:.1f}x a {args.limit} MiB limit"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cgroup = None if args.simulate else Cgroup(limit)
    limited_env = dict(env)
    if cgroup is None or cgroup.path is None:
        why = "--simulate" if cgroup is None else cgroup.why
        print(
            f"  no memory cgroup ({why}): the limit is simulated with STOKER_MEMORY_LIMIT; nothing bounds the page cache"
        )
        limited_env["STOKER_MEMORY_LIMIT"] = str(limit)
    procs = None if cgroup is None or cgroup.path is None else str(cgroup.path / "cgroup.procs")
    try:
        rows = [("unlimited", {}, None, env), ("limited, sized", {}, procs, limited_env)]
        if not args.skip_old:
            rows.append(("limited, old", OLD, procs, limited_env))
        for pair in filter(None, args.sizes.split(",")):  # other sizes under the limit, for comparison
            block, window = map(int, pair.split("x"))
            rows.append((f"limited, {pair}", {"block_size": block, "window": window}, procs, limited_env))
        results: dict[str, dict] = {}
        for r in range(args.rounds):  # best of the rounds, the order reversed each round (a noisy machine)
            for name, sizes, procs_, env_ in rows if r % 2 == 0 else rows[::-1]:
                if name in results and results[name]["seconds"] == float("inf"):
                    continue  # one stopped run is enough
                got = run(store, tmp, name.replace(", ", "-"), sizes, procs_, env_, args.timeout)
                if name not in results or got["seconds"] < results[name]["seconds"]:
                    results[name] = got
    finally:
        if cgroup is not None:
            cgroup.remove()
    print(f"  best of {args.rounds} cold epochs each:")
    base = results["unlimited"]["seconds"]
    for name, r in results.items():
        print(
            f"  {name:15s} {r['seconds']:8.2f} s  {base / r['seconds']:5.2f}x unlimited  rows {r['rows']}  {r['order']}"
        )


def remote(args: argparse.Namespace, tmp: Path) -> None:
    import socket

    import boto3
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(AWS_ACCESS_KEY_ID="k", AWS_SECRET_ACCESS_KEY="secret-key", AWS_ENDPOINT_URL=endpoint)
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
    try:
        rows = args.remote_mib * 2**20 // args.row_bytes
        data = {"i": np.arange(rows), "x": np.zeros((rows, args.row_bytes - 8), np.uint8)}
        url = stoker.write("s3://bench/store", data, shard_size="1MB")
        size = stoker.open(str(url), cache_dir=tmp / "probe").nbytes
        print(f"remote: a store of {size / 2**20:.0f} MiB in 1 MB shards, cache_limit a tenth of it")
        for name, sizes in (("sized", {}), ("old", OLD)):
            ds = stoker.open(str(url), cache_dir=tmp / f"cache-{name}", cache_limit=size // 10)
            loader = stoker.Loader(ds, batch_size=64, shuffle="block", seed=1, num_workers=2, **sizes)
            start = time.perf_counter()
            n = sum(len(b["i"]) for b in loader)
            fetched = ds.remote_stats()["bytes_fetched"]
            print(
                f"  {name:6s} fetched {fetched / size:5.2f}x the store, {time.perf_counter() - start:6.2f} s, "
                f"rows {n}, {loader.block_order}"
            )
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child")
    parser.add_argument("--limit", type=int, default=128, help="the memory cgroup's limit, MiB")
    parser.add_argument("--ratio", type=int, default=4, help="the store is this many times the limit")
    parser.add_argument("--row-bytes", type=int, default=12288)
    parser.add_argument("--skip-old", action="store_true", help="leave out the old defaults under the limit")
    parser.add_argument("--simulate", action="store_true", help="STOKER_MEMORY_LIMIT instead of a cgroup")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each epoch; the best is printed")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds at most per epoch")
    parser.add_argument("--sizes", default="", help="also these sizes under the limit: 1024x4,512x8")
    parser.add_argument("--remote", action="store_true", help="also the remote store with a small cache")
    parser.add_argument("--remote-mib", type=int, default=48)
    parser.add_argument("--no-local", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    with tempfile.TemporaryDirectory(prefix="stoker-block-memory-") as tmp:
        if not args.no_local:
            local(args, Path(tmp))
        if args.remote:
            remote(args, Path(tmp))


if __name__ == "__main__":
    main()
