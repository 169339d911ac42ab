"""fsspec/s3fs against obstore: whole-object downloads from one S3-protocol server on loopback (moto).

Both clients fetch the same objects into local files, in one process run, alternating rounds;
printed as MB/s and the ratio obstore / s3fs. The server is moto (Python), so both clients may
be held back by it: a ratio near 1 says the client is not the bottleneck here, not that the
two are equal against a fast server. Needs moto[server], s3fs and obstore.

    .venv/bin/python benchmarks/bench_object_clients.py [--objects 16] [--mib 8] [--threads 1,4]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import boto3
import s3fs

KEY, SECRET = "benchkey", "benchsecret"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=16)
    ap.add_argument("--mib", type=int, default=8)
    ap.add_argument("--threads", default="1,4")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import obstore
    from obstore.store import S3Store

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # the server in its own process (moto_server), so that it does not share this process's GIL with the clients
    server = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    client = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=KEY, aws_secret_access_key=SECRET, region_name="us-east-1"
    )
    client.create_bucket(Bucket="bench")
    body = os.urandom(args.mib * 2**20)
    names = [f"obj-{i:04d}" for i in range(args.objects)]
    for name in names:
        client.put_object(Bucket="bench", Key=name, Body=body)
    fs = s3fs.S3FileSystem(key=KEY, secret=SECRET, endpoint_url=endpoint, skip_instance_cache=True)
    store = S3Store(
        "bench",
        endpoint=endpoint,
        access_key_id=KEY,
        secret_access_key=SECRET,
        region="us-east-1",
        client_options={"allow_http": True},
    )
    out = tempfile.mkdtemp()

    def with_s3fs(name: str) -> None:
        fs.get_file(f"bench/{name}", os.path.join(out, name))

    def with_obstore(name: str) -> None:
        data = obstore.get(store, name).bytes()
        with open(os.path.join(out, name), "wb") as f:
            f.write(memoryview(data))

    total = args.objects * args.mib * 2**20
    for threads in (int(t) for t in args.threads.split(",")):
        best = {"s3fs": float("inf"), "obstore": float("inf")}
        for _ in range(args.rounds):
            for label, fn in (("s3fs", with_s3fs), ("obstore", with_obstore)):
                t = time.perf_counter()
                with ThreadPoolExecutor(threads) as pool:
                    list(pool.map(fn, names))
                best[label] = min(best[label], time.perf_counter() - t)
        rate = {k: total / v / 1e6 for k, v in best.items()}
        print(
            f"threads={threads}: s3fs {rate['s3fs']:.0f} MB/s, obstore {rate['obstore']:.0f} MB/s, "
            f"obstore/s3fs {rate['obstore'] / rate['s3fs']:.2f}x (best of {args.rounds}, {args.objects} x {args.mib} MiB)"
        )
    server.terminate()
    server.wait()


if __name__ == "__main__":
    main()
