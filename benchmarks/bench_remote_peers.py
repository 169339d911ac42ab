"""stoker against LitData and MosaicML Streaming, each streaming the same rows from one loopback S3 server.

The same synthetic rows (3x64x64 uint8 images + int64 labels, as in bench_remote.py) are written
once in each reader's own format and uploaded to one moto_server (its own process, 127.0.0.1):

  stoker     stoker.write to s3://bench/stoker (8 MB shards);
  litdata    litdata.optimize (8 MB chunks) into a local directory, uploaded to s3://bench/litdata;
  streaming  streaming.MDSWriter (8 MB shards, columns ndarray:uint8:3,64,64 and int64), uploaded to
             s3://bench/mds.

Each round then reads one shuffled epoch of each from a fresh, empty cache (cold), on the CPU,
batch 256: stoker.Loader(shuffle="block") in this process; LitData's StreamingDataset(shuffle=True)
+ StreamingDataLoader and Streaming's StreamingDataset(shuffle=True) + torch DataLoader, each in a
child process of its own venv (.venv-peers, .venv-mosaic; ``make .venv-mosaic/.installed``), once
per DataLoader worker count of ``--peer-workers`` (0 and 2: on 2 cores, worker processes can cost
more than they give); each peer's best is compared with. The time counted is from opening the dataset (its index or
manifest fetched) to the last batch; rows are counted, so a short epoch shows. Printed: rows/s
of each, and per round stoker's rate over each peer's; the medians at the end (target >= 1.5x).
A peer whose venv is missing or whose run fails loses its column, with the reason printed.

    flock /tmp/stoker-bench.lock .venv/bin/python benchmarks/bench_remote_peers.py [--mb 128] [--rounds 3]

The peers are pointed at the server by their documented means: LitData's ``storage_options``
(boto3 client keywords), Streaming's ``S3_ENDPOINT_URL``, and the AWS_* variables (LitData
0.2.76 downloads chunks with obstore, built from its boto3 client with fixed client options that
refuse http://: the child adds ``allow_http`` to them, so LitData runs its own fast path here).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

KEY, SECRET = "benchkey", "benchsecret"
HERE = Path(__file__).resolve()
ROOT = HERE.parent.parent
PEERS = {"litdata": ROOT / ".venv-peers" / "bin" / "python", "streaming": ROOT / ".venv-mosaic" / "bin" / "python"}
BATCH = 256


# -- the child: runs in a peer's venv, imports neither stoker nor anything of this repository ----------------------
def _env_for(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
        "S3_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",  # LitData downloads chunks with obstore, which refuses http:// without it
    }


def _upload(local: Path, endpoint: str, prefix: str) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint)
    for path in sorted(local.rglob("*")):
        if path.is_file():
            client.upload_file(str(path), "bench", f"{prefix}/{path.relative_to(local)}")


def _litdata_item(i: int) -> dict[str, object]:
    import numpy as np

    images = np.load(os.environ["BENCH_WORK"] + "/image.npy", mmap_mode="r")
    return {"image": np.ascontiguousarray(images[i]), "label": int(i)}


def _child_write(peer: str, work: Path, endpoint: str) -> None:
    import numpy as np

    images = np.load(work / "image.npy", mmap_mode="r")
    local = work / f"{peer}-local"
    shutil.rmtree(local, ignore_errors=True)
    if peer == "litdata":
        import litdata

        os.environ["BENCH_WORK"] = str(work)
        litdata.optimize(
            fn=_litdata_item, inputs=list(range(len(images))), output_dir=str(local), chunk_bytes="8MB", num_workers=1
        )
        _upload(local, endpoint, "litdata")
    else:
        from streaming import MDSWriter

        columns = {"image": f"ndarray:uint8:{','.join(map(str, images.shape[1:]))}", "label": "int64"}
        with MDSWriter(out=str(local), columns=columns, size_limit="8mb") as out:
            for i in range(len(images)):
                out.write({"image": np.ascontiguousarray(images[i]), "label": np.int64(i)})
        _upload(local, endpoint, "mds")
    shutil.rmtree(local, ignore_errors=True)


def _child_read(peer: str, work: Path, endpoint: str, workers: int, cache: Path) -> dict[str, float]:
    """One cold epoch: the clock starts after the imports (torch's included), as stoker's does in its warm process."""
    import torch.utils.data

    if peer == "litdata":
        from litdata import StreamingDataLoader, StreamingDataset
        from litdata.streaming import downloader

        # LitData's obstore chunk path takes no allow_http from its options or the environment: added here,
        # so that it runs its own fast path against the http:// loopback server (as it would over https)
        downloader._OBSTORE_CLIENT_OPTIONS = {**downloader._OBSTORE_CLIENT_OPTIONS, "allow_http": True}
        options = {"endpoint_url": endpoint, "aws_access_key_id": KEY, "aws_secret_access_key": SECRET}
        t = time.perf_counter()
        ds = StreamingDataset("s3://bench/litdata", cache_dir=str(cache), shuffle=True, storage_options=options)
        loader: Any = StreamingDataLoader(ds, batch_size=BATCH, num_workers=workers)
    else:
        from streaming import StreamingDataset as MDSDataset

        t = time.perf_counter()
        mds = MDSDataset(remote="s3://bench/mds", local=str(cache), shuffle=True, batch_size=BATCH)
        loader = torch.utils.data.DataLoader(mds, batch_size=BATCH, num_workers=workers)
    rows = sum(len(batch["label"]) for batch in loader)
    return {"rows": rows, "seconds": time.perf_counter() - t}


def child(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", required=True, choices=sorted(PEERS))
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cache", type=Path)
    args = ap.parse_args(argv)
    os.environ.update(_env_for(args.endpoint))
    if args.write:
        _child_write(args.child, args.work, args.endpoint)
        print(json.dumps({"written": True}))
    else:
        print(json.dumps(_child_read(args.child, args.work, args.endpoint, args.workers, args.cache)))


# -- the parent: stoker's venv ---------------------------------------------------------------------------------------
def _run_child(peer: str, extra: list[str], work: Path, endpoint: str) -> dict[str, float] | str:
    """The child's JSON answer, or why there is none (missing venv, a failure: its last lines)."""
    python = PEERS[peer]
    if not python.exists():
        return f"{python.parent.parent.name} is missing (make {python.parent.parent.name}/.installed)"
    cmd = [str(python), str(HERE), "--child", peer, "--work", str(work), "--endpoint", endpoint, *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env={**os.environ, **_env_for(endpoint)})
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        return f"exit {proc.returncode}: {tail[-400:]}"
    return dict(json.loads(lines[-1]))


def parent(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=128, help="data size in MiB")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--peer-workers", default="0,2", help="DataLoader workers of the peers: each count is run")
    ap.add_argument("--peers", default="litdata,streaming")
    args = ap.parse_args(argv)
    import boto3
    import numpy as np

    import stoker
    from bench_remote import _server  # the parent runs in stoker's venv; the peers' children never import it

    peers = [p for p in args.peers.split(",") if p]
    rows = args.mb * 2**20 // (3 * 64 * 64 + 8)
    work = Path(tempfile.mkdtemp(prefix="bench-remote-peers-"))
    proc, endpoint = _server()
    options = {"key": KEY, "secret": SECRET, "endpoint_url": endpoint}
    try:
        boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id=KEY, aws_secret_access_key=SECRET, region_name="us-east-1"
        ).create_bucket(Bucket="bench")
        images = np.random.default_rng(0).integers(0, 255, size=(rows, 3, 64, 64), dtype=np.uint8)
        np.save(work / "image.npy", images)
        url = "s3://bench/stoker"
        stoker.write(
            url, {"image": images, "label": np.arange(rows, dtype=np.int64)}, shard_size="8MB", storage_options=options
        )
        del images
        failed: dict[str, str] = {}
        for peer in peers:
            got = _run_child(peer, ["--write"], work, endpoint)
            if isinstance(got, str):
                failed[peer] = got
                print(f"{peer}: cannot write its format: {got}", flush=True)
        ratios: dict[str, list[float]] = {p: [] for p in peers if p not in failed}
        for r in range(args.rounds):
            t = time.perf_counter()
            ds = stoker.open(url, cache_dir=work / f"stoker-cache-{r}", storage_options=options)
            n = sum(len(b["label"]) for b in stoker.Loader(ds, batch_size=BATCH, shuffle="block", seed=r))
            mine = n / (time.perf_counter() - t)
            stats = ds.remote_stats()
            client = f"{stats['client']}, {stats['shards_fetched']} shards fetched"
            del ds
            shutil.rmtree(work / f"stoker-cache-{r}", ignore_errors=True)
            line = f"round {r}: stoker ({client}) {mine:,.0f} rows/s ({n:,} rows)"
            for peer in list(ratios):
                best = 0.0
                for workers in (int(w) for w in args.peer_workers.split(",")):
                    cache = work / f"{peer}-cache-{r}-{workers}"
                    got = _run_child(peer, ["--workers", str(workers), "--cache", str(cache)], work, endpoint)
                    shutil.rmtree(cache, ignore_errors=True)
                    if isinstance(got, str):
                        print(f"{peer}: failed in round {r} with {workers} workers: {got}", flush=True)
                        continue
                    rate = got["rows"] / got["seconds"]
                    short = "" if int(got["rows"]) == rows else f", {int(got['rows']):,} rows of {rows:,}"
                    line += f"; {peer} ({workers} workers) {rate:,.0f} rows/s{short}"
                    best = max(best, rate) if not short else best  # a short epoch is no rate to compare with
                if best:
                    ratios[peer].append(mine / best)
                    line += f" (stoker / its best {mine / best:.2f}x)"
            print(line, flush=True)
        print(
            f"data: {rows:,} rows, {args.mb} MiB, 8 MB shards/chunks; batch {BATCH}, shuffled, cold cache; "
            f"peers with {args.peer_workers} DataLoader workers (the best counted); load average "
            f"{os.getloadavg()[0]:.2f}"
        )
        for peer, values in ratios.items():
            if values:
                print(f"stoker cold / {peer} cold: median {statistics.median(values):.2f}x   (target >= 1.5x)")
            else:
                print(f"{peer}: no full epoch in any round")
        for peer, why in failed.items():
            print(f"{peer}: no figure ({why})")
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if "--child" in sys.argv:
        child(sys.argv[1:])
    else:
        parent(sys.argv[1:])
