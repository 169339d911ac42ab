"""Issue 18's remote-store targets, side by side in one run, ratios printed.

The same store, written once locally and once to a server on loopback (``--server``), read by
``stoker.Loader`` (threads, ``shuffle="block"``), cold then warm. Every remote row (stoker's cold
and warm epochs, fsspec's, the ceiling, the shard traffic) runs against the same server, named in
the first line printed:

  moto     moto_server (Python, the test suite's server), in its own process; the store uploaded
           by stoker's writer;
  s3rver   s3rver (Node.js, ``npm install s3rver``; ``--s3rver EXE`` names the executable);
  nginx    nginx (C, ``scripts/s3-server.sh`` installs it) serving the store's objects as files at
           their path-style S3 URLs (``/bucket/key``), one worker process, sendfile: the GET and
           HEAD of S3 that a reader sends (the signature is not checked; no LIST, no upload: the
           store is copied into its root). It is here because it takes far less CPU than moto on
           this machine's two cores, as an object store on another machine takes none of them.

  local cold   the shard files written back (fsync) and dropped from the page cache (posix_fadvise
               DONTNEED) first; what stayed resident is printed (fincore);
  local warm   the epochs after, the shards in the page cache;
  remote cold  a fresh, empty cache_dir: every shard downloaded during the epoch (obstore, the
               default client; and once more through fsspec/s3fs, STOKER_REMOTE_CLIENT=fsspec);
  remote warm  the epochs after: every shard in the cache (and mapped);
  ceiling      the server's own rate: every shard object of the store fetched with obstore on
               FETCH_THREADS threads into memory, nothing else (no stoker, no disk, no checksum).

On a VM with free page reporting (``/sys/module/page_reporting``), every cold epoch (fsspec's,
local, remote) starts with its free memory in the state ``--memory`` names (``_prepare`` says
why): ``recycled`` (the default: just freed, as on a machine without free page reporting),
``reported`` (handed back to the host) or ``as-is``. The first line printed gives page-cache
write rates into both kinds of memory.

The server shares this machine's cores with the reader (moto's Python most of all), so "remote cold / ceiling"
(stoker's cold epoch in bytes/s over the raw GET rate of the same objects) says how much of what
the server can give stoker takes; "remote cold / local cold" says how far that is from a local disk.

Targets: remote cold >= 0.8x local cold, remote warm >= 0.95x local warm. Each round runs both
cold epochs, then ``--warm`` pairs of warm epochs (local first, then remote first, in turns); the
ratios printed are medians of the paired ratios (cold: one pair per round; warm: every pair), with
the share of each store's mapped shard bytes that the kernel maps as 2 MiB pages (a file read back
from disk through a map gets small page-cache folios; one written in aligned blocks, large ones). Also
printed, per cache_limit tried: the shard traffic of one block-shuffled epoch (bytes fetched /
store bytes). Rows are synthetic 3x64x64 uint8 images + int64 labels.

    flock /tmp/stoker-bench.lock .venv/bin/python benchmarks/bench_remote.py [--mb 128] [--rounds 3] [--server nginx]
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
import numpy as np

import stoker

KEY, SECRET = "benchkey", "benchsecret"


def _serve(argv_for_port: Callable[[int], list[str]]) -> tuple[subprocess.Popen[bytes], str]:
    """Start the server ``argv_for_port(port)`` on a free loopback port; wait until it accepts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(argv_for_port(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(400):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, f"http://127.0.0.1:{port}"


def _server() -> tuple[subprocess.Popen[bytes], str]:
    """moto_server (from this interpreter's environment) on loopback."""
    exe = os.path.join(os.path.dirname(sys.executable), "moto_server")
    return _serve(lambda port: [exe, "-H", "127.0.0.1", "-p", str(port)])


def _s3rver(exe: str, root: Path) -> tuple[subprocess.Popen[bytes], str]:
    """s3rver (a Node.js S3-protocol server, ``npm install s3rver``) at ``exe``, its objects under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    return _serve(
        lambda port: [exe, "-d", str(root), "-a", "127.0.0.1", "-p", str(port), "--silent", "--no-vhost-buckets"]
    )


_NGINX_CONF = """daemon off;
user root;
worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/nginx-error.log;
events {{ worker_connections 256; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    default_type application/octet-stream;
    client_body_temp_path {work}/tmp;
    proxy_temp_path {work}/tmp;
    fastcgi_temp_path {work}/tmp;
    uwsgi_temp_path {work}/tmp;
    scgi_temp_path {work}/tmp;
    server {{
        listen 127.0.0.1:{port};
        root {root};
    }}
}}
"""


def _nginx(exe: str, work: Path) -> tuple[subprocess.Popen[bytes], str]:
    """nginx at ``exe`` serving the files under ``work/objects`` (bucket directories) at their path-style URLs."""
    (work / "objects").mkdir(parents=True, exist_ok=True)
    (work / "tmp").mkdir(exist_ok=True)

    def argv(port: int) -> list[str]:
        conf = work / "nginx.conf"
        conf.write_text(_NGINX_CONF.format(work=work, port=port, root=work / "objects"))
        return [exe, "-c", str(conf), "-p", str(work), "-e", str(work / "nginx-error.log")]

    return _serve(argv)


def _drop(store: Path) -> str:
    """Drop ``store``'s shard files from the page cache; what stayed resident, as ``fincore`` tells it.

    Dirty pages are not dropped by DONTNEED: a store just written stays in memory unless it is
    written back first (fsync), and its "cold" epoch would read memory.
    """
    shards = sorted(store.glob("*.arrow"))
    for shard in shards:
        fd = os.open(shard, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    fincore = shutil.which("fincore")
    if fincore is None:
        return "resident after the drop: not checked (no fincore)"
    out = subprocess.run([fincore, "-b", "-n", "-o", "RES", *map(str, shards)], capture_output=True, text=True)
    resident = sum(int(x) for x in out.stdout.split()) if out.returncode == 0 else -1
    return f"resident after the drop: {resident / 2**20:.1f} MiB" if resident >= 0 else "resident: fincore failed"


_REPORTED = Path("/sys/module/page_reporting/parameters/reported_kib")


def _settle() -> str:
    """Wait until this VM's free page reporting is quiet (no page reported for 3 s, at most 30 s)."""
    start = time.perf_counter()
    begin = last = int(_REPORTED.read_text())
    quiet = time.perf_counter()
    while time.perf_counter() - quiet < 3 and time.perf_counter() - start < 30:
        time.sleep(0.25)
        now = int(_REPORTED.read_text())
        if now != last:
            last, quiet = now, time.perf_counter()
    return f"settled {time.perf_counter() - start:.1f} s, {(last - begin) / 1024:,.0f} MiB reported to the host"


def _scratch(path: Path, nbytes: int, piece: int = 4 * 2**20) -> float:
    """Write ``nbytes`` to ``path`` in aligned ``piece``-sized writes, then delete it; MB/s of the write."""
    block = np.random.default_rng(1).integers(0, 255, piece, dtype=np.uint8).tobytes()
    t = time.perf_counter()
    with open(path, "wb") as f:
        for _ in range(-(-nbytes // piece)):
            f.write(block)
    rate = nbytes / (time.perf_counter() - t) / 1e6
    path.unlink()
    return rate


def _prepare(memory: str, scratch: Path, nbytes: int) -> str:
    """Put free memory in the state ``--memory`` names before a cold epoch; what was done, for the line printed.

    On a VM with free page reporting (virtio-balloon), memory freed a while ago is handed back to
    the host, and page-cache pages taken from it cost far more to fill: ``_write_rates`` prints
    both rates (here 3-6 GB/s against about 0.4-0.5 GB/s in 4 MiB writes). A local cold epoch's pages
    are filled by the host's disk emulation and hardly feel it; a remote one's are written by this
    VM's CPU and do. ``recycled``: a scratch file of ``nbytes`` is written and deleted right
    before the epoch, so the epoch's page cache comes from memory just freed, backed by the
    host, as every free page is on a machine without free page reporting. ``reported``: wait
    until reporting is quiet, so the epoch's pages come from memory the host took back, as on
    such a VM whose free memory sat idle. ``as-is``: nothing (each epoch reuses what the step
    before it freed, which favours the local cold epoch: it follows the drop of its own pages).
    """
    if memory == "as-is" or not _REPORTED.exists():
        return ""
    if memory == "reported":
        return _settle()
    return f"scratch {_scratch(scratch, nbytes) / 1e3:.1f} GB/s"


def _write_rates(directory: Path, mb: int = 1024) -> str:
    """Page-cache write rates (MB/s) of ``mb`` MiB in 4 MiB writes into memory freed just before, and
    into memory that the VM's free page reporting handed back to the host (``_prepare``)."""
    _scratch(directory / "a", mb * 2**20)
    recycled = _scratch(directory / "b", mb * 2**20)  # the pages "a" just freed
    _settle()
    reported = _scratch(directory / "c", mb * 2**20)
    return (
        f"page-cache writes of {mb} MiB: {recycled:,.0f} MB/s into memory freed just before, {reported:,.0f} MB/s "
        "into memory reported to the host"
    )


def _epoch(ds: stoker.Store, batch_size: int) -> tuple[float, float]:
    """Rows per second of one block-shuffled epoch over ``ds`` (a new loader: the same order every time),
    and the seconds to its first batch."""
    loader = stoker.Loader(ds, batch_size=batch_size, shuffle="block", seed=1)
    t = time.perf_counter()
    first = 0.0
    n = 0
    for b in loader:
        if not n:
            first = time.perf_counter() - t
        n += len(b["label"])
    return n / (time.perf_counter() - t), first


def _huge_share(directory: Path) -> float:
    """The share of this process's mapped bytes of ``directory``'s shard files mapped as 2 MiB pages."""
    rss = pmd = 0
    name = ""
    with open("/proc/self/smaps") as f:
        for line in f:
            parts = line.split()
            if parts and "-" in parts[0] and len(parts) >= 5:  # a mapping's header line
                name = parts[5] if len(parts) >= 6 else ""
            elif name.startswith(str(directory)) and name.endswith(".arrow"):
                if parts[0] == "Rss:":
                    rss += int(parts[1])
                elif parts[0] == "FilePmdMapped:":
                    pmd += int(parts[1])
    return pmd / rss if rss else 0.0


def _load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def _ceiling(endpoint: str, url: str, names: list[str]) -> float:
    """Bytes per second of fetching ``names`` (objects under ``url``) with obstore, FETCH_THREADS at once, into memory."""
    import obstore
    from obstore.store import S3Store

    from stoker.remote.reader import FETCH_THREADS

    bucket, prefix = url[len("s3://") :].split("/", 1)
    store = S3Store(
        bucket,
        prefix=prefix,
        endpoint=endpoint,
        access_key_id=KEY,
        secret_access_key=SECRET,
        region="us-east-1",
        client_options={"allow_http": True},
    )
    t = time.perf_counter()
    with ThreadPoolExecutor(FETCH_THREADS) as pool:
        total = sum(pool.map(lambda name: len(obstore.get(store, name).bytes()), names))
    return total / (time.perf_counter() - t)


def _open_with(client: str, url: str, cache_dir: Path, options: dict[str, str]) -> stoker.Store:
    """The store at ``url`` opened with STOKER_REMOTE_CLIENT=``client``."""
    os.environ["STOKER_REMOTE_CLIENT"] = client
    try:
        return stoker.open(url, cache_dir=cache_dir, storage_options=options)
    finally:
        del os.environ["STOKER_REMOTE_CLIENT"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=128, help="store size in MiB")
    ap.add_argument("--shard", default="8MB")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warm", type=int, default=10, help="warm epoch pairs per round, local and remote in turns")
    ap.add_argument("--server", choices=("moto", "s3rver", "nginx"), default="moto", help="what serves the objects")
    ap.add_argument("--s3rver", metavar="EXE", help="s3rver's executable (implies --server s3rver)")
    ap.add_argument(
        "--traffic",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="measure the shard traffic per cache_limit (default: only for stores of at most 256 MiB: with the "
        "default order a small cache re-fetches the store ~200 times an epoch)",
    )
    ap.add_argument(
        "--memory",
        choices=("recycled", "reported", "as-is"),
        default="recycled",
        help="on a VM with free page reporting: the free memory every cold epoch, local or remote, starts with "
        "(see _prepare; default: recycled, as on a machine without free page reporting)",
    )
    ap.add_argument("--nginx", metavar="EXE", default=shutil.which("nginx") or "/usr/sbin/nginx")
    args = ap.parse_args()
    if args.s3rver:
        args.server = "s3rver"
    rows = args.mb * 2**20 // (3 * 64 * 64 + 8)
    work = Path(tempfile.mkdtemp(prefix="bench-remote-"))
    global KEY, SECRET
    if args.server == "s3rver":
        KEY = SECRET = "S3RVER"  # the only credentials s3rver accepts
        exe = args.s3rver or shutil.which("s3rver") or "s3rver"
        proc, endpoint = _s3rver(exe, work / "s3rver")
        print(f"server: s3rver {exe}")
    elif args.server == "nginx":
        proc, endpoint = _nginx(args.nginx, work / "nginx")
        version = subprocess.run([args.nginx, "-v"], capture_output=True, text=True).stderr.strip()
        print(f"server: {version} ({args.nginx}), one worker, the store's objects as files (GET/HEAD only)")
    else:
        proc, endpoint = _server()
        print("server: moto_server")
    if _REPORTED.exists():
        print(
            f"free page reporting: on ({_write_rates(work)}); free memory before every cold epoch: --memory {args.memory}"
        )
    options = {"key": KEY, "secret": SECRET, "endpoint_url": endpoint}
    try:
        if args.server != "nginx":
            boto3.client(
                "s3",
                endpoint_url=endpoint,
                aws_access_key_id=KEY,
                aws_secret_access_key=SECRET,
                region_name="us-east-1",
            ).create_bucket(Bucket="bench")
        rng = np.random.default_rng(0)
        data = {
            "image": rng.integers(0, 255, size=(rows, 3, 64, 64), dtype=np.uint8),
            "label": np.arange(rows, dtype=np.int64),
        }
        local = work / "local"
        stoker.write(local, data, shard_size=args.shard)
        url = "s3://bench/store"
        if args.server == "nginx":  # a copy (not a link: dropping the local store's pages must not drop these)
            shutil.copytree(local, work / "nginx" / "objects" / "bench" / "store")
        else:
            with stoker.StoreWriter(url, shard_size=args.shard, storage_options=options) as writer:
                writer.add_batch(data)
        del data
        ratios: dict[str, list[float]] = {key: [] for key in ("fsspec", "cold", "warm", "ceiling", "bound")}
        names = [
            info.file for info in stoker.open(url, cache_dir=work / "names", storage_options=options).manifest.shards
        ]
        store_bytes = stoker.open(local).nbytes

        def prepare() -> str:  # free memory before a cold epoch, as --memory says
            return _prepare(args.memory, work / "scratch", store_bytes * 5 // 4)

        for r in range(args.rounds):
            ceiling = _ceiling(endpoint, url, names)
            slow = _open_with("fsspec", url, work / f"fsspec-{r}", options)
            prepare()
            fc, _ = _epoch(slow, args.batch)
            shutil.rmtree(work / f"fsspec-{r}", ignore_errors=True)
            dropped = _drop(local)
            prepared = prepare()
            near = stoker.open(local)
            lc, lfirst = _epoch(near, args.batch)
            ratios["fsspec"].append(fc / lc)
            cache = work / f"cache-{r}"
            far = _open_with("obstore", url, cache, options)
            prepare()
            rc, rfirst = _epoch(far, args.batch)
            ratios["cold"].append(rc / lc)
            ratios["ceiling"].append(rc * store_bytes / rows / ceiling)
            warm, remote_warm = [], []
            for k in range(args.warm):  # pairs in turns (local first, then remote first): drifts hit both alike
                if k % 2:
                    rw, lw = _epoch(far, args.batch)[0], _epoch(near, args.batch)[0]
                else:
                    lw, rw = _epoch(near, args.batch)[0], _epoch(far, args.batch)[0]
                warm.append(rw / lw)
                remote_warm.append(rw)
                ratios["warm"].append(rw / lw)
            # With one window over the whole store (the defaults here), a batch needs rows of every shard: the
            # first batch waits for the whole store, and a cold epoch can at best take the store at the
            # server's ceiling, then a warm epoch's reads.
            bound = rows / (store_bytes / ceiling + rows / statistics.median(remote_warm))
            ratios["bound"].append(bound / lc)
            huge = (_huge_share(local), _huge_share(cache))
            fetched_by = far.remote_stats()["fetched_by"]
            del far
            gc.collect()
            shutil.rmtree(cache, ignore_errors=True)
            line = (
                f"  remote cold {rc:,.0f} rows/s ({rc / lc:.2f}x, {rc * store_bytes / rows / 1e6:,.0f} "
                f"MB/s, first batch {rfirst * 1e3:.0f} ms; fetched {fetched_by}); warm remote/local, {args.warm} "
                f"pairs: median {statistics.median(warm):.2f}x (shards mapped as 2 MiB pages: local "
                f"{huge[0]:.0%}, remote {huge[1]:.0%}); bound on remote cold (store at the ceiling + a warm "
                f"epoch) {bound:,.0f} rows/s ({bound / lc:.2f}x local cold)"
            )
            del near  # unmapped, so that the next round's DONTNEED can drop the local shards
            gc.collect()
            print(
                f"round {r} ({_load()}): server ceiling {ceiling / 1e6:,.0f} MB/s; local cold {lc:,.0f} rows/s "
                f"(first batch {lfirst * 1e3:.0f} ms; {dropped}{'; ' + prepared if prepared else ''}), through fsspec {fc:,.0f} rows/s ({fc / lc:.2f}x)",
                flush=True,
            )
            print(line, flush=True)
        print(f"store: {rows:,} rows, {args.mb} MiB in {args.shard} shards; batch {args.batch}, shuffle='block'")
        cold = ratios["cold"]
        print(
            f"  remote cold / local cold: {statistics.median(cold):.2f}x   (target >= 0.8x; rounds "
            f"{', '.join(f'{x:.2f}' for x in cold)})"
        )
        print(f"  remote cold / server ceiling (bytes/s): {statistics.median(ratios['ceiling']):.2f}")
        print(
            "  bound on remote cold (the store at the server's ceiling, then a warm epoch) / local cold: "
            f"{statistics.median(ratios['bound']):.2f}x"
        )
        print(
            f"  remote warm / local warm: {statistics.median(ratios['warm']):.2f}x   (target >= 0.95x; median "
            f"of {len(ratios['warm'])} pairs)"
        )
        print(f"remote cold through fsspec / local cold: {statistics.median(ratios['fsspec']):.2f}x")
        shard = max(s.bytes for s in stoker.open(local).manifest.shards)
        per_shard = stoker.open(local).manifest.shards[0].rows
        orders = {
            "defaults (block_size 4096, window 16)": {},
            f"block_size {per_shard} (a shard), window 4": {"block_size": per_shard, "window": 4},
        }
        if not (args.traffic if args.traffic is not None else args.mb <= 256):
            print("shard traffic: not measured (--no-traffic, or a store over 256 MiB; --traffic measures it)")
            orders = {}
        for label, order in orders.items():
            for shards in (2, 4, 6, 8, None):
                limit = None if shards is None else shards * shard
                ds = stoker.open(url, cache_dir=work / "traffic", cache_limit=limit, storage_options=options)
                for _ in stoker.Loader(ds, batch_size=args.batch, shuffle="block", seed=1, **order):
                    pass
                fetched = ds.remote_stats()["bytes_fetched"]
                shutil.rmtree(work / "traffic", ignore_errors=True)
                what = "no limit" if limit is None else f"{shards} shards ({limit / 2**20:.0f} MiB)"
                print(
                    f"shard traffic of one epoch, {label}, cache_limit {what}: {fetched / store_bytes:.2f}x the store"
                )
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
