"""Ray conversion (``stoker.convert.on_ray``) on a local Ray of ``--cpus`` CPUs against the single-machine one.

Inputs (``--kinds``): ``tsv``, the 20 Newsgroups TSVs (train then test, one header; ``scripts/fetch_data.py
text``) written ``--repeat`` times into one labelled TSV; ``text``, friends.txt (61,563 lines); ``images``, the
1,224 photos resized to 224. bert-base-uncased, ``max_length=128``. Contenders, each run ``--rounds`` times,
alternating which goes first: ``stoker.convert.text``/``images`` (``--cpus`` threads) and ``on_ray.text``/
``images`` (default partitions, 1 CPU and 1 thread per task) on a Ray started once before (its start is
printed apart: a cluster is running before a job). Prints best and median seconds and the speed ratio
single/ray (target >= 0.8), each Ray run's phases and each task's start and end.

Then the parts of a prediction for a cluster: the fixed cost of one map of Ray tasks (1 no-op task),
the cost per task (64 no-op tasks over the slots), the pre-pass and conversion rates of one core
(one partition's scan, one partition converted with 1 thread), and the cost per shard of the merge
(100 one-shard parts linked); and the model

    T = 2 F + S / (N C) * (1 / r_scan + 1 / r_convert) + 2 W o + P k (m + n)

(F fixed cost of a map, S input bytes, N nodes, C cores per node, P partitions of about 64 MiB in
W = P / (N C) whole waves, o per-task cost, k shards per partition, m merge cost per shard here,
n the metadata cost per shard assumed for a network file system, ``--nfs-ms``), evaluated for
``--tb`` TB on ``--nodes`` x ``--cores``. It is a prediction: it assumes a shared file system that
keeps up (the bandwidth it needs is printed) and cores as fast as these. ``--cpus 1`` gives the
curve's other point (Ray on 1 CPU against one converter thread).

    flock /tmp/stoker-bench.lock python benchmarks/bench_ray_convert.py [--data data] [--repeat 1] [--rounds 4]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

import stoker
from stoker.convert import from_text, on_ray
from stoker.convert.options import ConvertOptions
from stoker.convert.partitions import materialize, plan_text, scan_text_part
from stoker.convert.ray_map import run_map
from stoker.text.inputs import TextColumns

MAX_LENGTH = 128


def build_corpus(data: Path, out: Path, repeat: int) -> Path:
    sources = [data / "text" / "20news-train.tsv", data / "text" / "20news-test.tsv"]
    missing = [str(p) for p in sources if not p.is_file()]
    if missing:
        raise SystemExit(f"missing {missing}: run python scripts/fetch_data.py text --out {data}")
    with open(out, "wb") as w:
        w.write(sources[0].read_bytes().split(b"\n", 1)[0] + b"\n")
        for _ in range(repeat):
            for src in sources:
                body = src.read_bytes().split(b"\n", 1)[1]
                w.write(body if body.endswith(b"\n") else body + b"\n")
    return out


def noop(row, job=None):
    return {"index": row["index"], "result": "null", "error": b""}


def warm(i):
    """A worker's first import of the converters (seconds of torch and tokenizers), done before timing."""
    import time

    import stoker.convert.from_images  # noqa: F401
    import stoker.convert.from_text  # noqa: F401

    time.sleep(0.5)  # held a moment, so that every warm-up lands on its own worker
    return i


def map_seconds(ray, n: int) -> float:
    """Seconds to run ``n`` no-op tasks as the conversion runs its partitions (``ray_map.run_map``)."""
    t0 = time.perf_counter()
    run_map(ray, noop, list(range(n)), {}, 1, 0, Path(tempfile.gettempdir()), "noop", "noop")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="data")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--tb", type=float, default=10.0)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--cores", type=int, default=16)
    ap.add_argument("--nfs-ms", type=float, default=2.0, help="assumed metadata ms per shard of a network FS merge")
    ap.add_argument("--worker-niceness", type=int, default=0, help="RAY_worker_niceness (Ray's default: 15)")
    ap.add_argument("--cpus", type=int, default=2, help="Ray CPUs, and the single machine's converter threads")
    ap.add_argument("--kinds", default="tsv,text,images", help="which inputs: tsv, text, images (comma-separated)")
    ap.add_argument("--partitions", type=int, default=None, help="Ray partitions (default: on_ray's)")
    ap.add_argument("--predict", action=argparse.BooleanOptionalAction, default=True, help="the cluster model")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import ray

    work = Path(tempfile.mkdtemp(prefix="stoker-bench-ray-"))
    try:
        corpus = build_corpus(Path(args.data), work / "corpus.tsv", args.repeat)
        size = corpus.stat().st_size
        print(f"input: {corpus.name}, {size / 2**20:.1f} MiB; load average {os.getloadavg()}")
        # Ray starts its workers at nice +15 (RAY_worker_niceness): on a machine shared with other work they would
        # get a sliver of the CPU beside the single-machine converter at the driver's nice; like with like here
        os.environ.setdefault("RAY_worker_niceness", str(args.worker_niceness))
        t0 = time.perf_counter()
        ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        print(
            f"ray.init ({args.cpus} CPUs, RAY_worker_niceness={os.environ['RAY_worker_niceness']}): "
            f"{time.perf_counter() - t0:.1f} s (not counted below)"
        )
        ray.get([ray.remote(num_cpus=1)(warm).remote(i) for i in range(args.cpus)])
        # the 2 workers started and stoker's converter imported in each, as on a cluster that runs before a job

        parts, onray = 0, 0.0
        for kind in args.kinds.split(","):
            got = compare(kind, corpus, Path(args.data), work, args.rounds, args.partitions, args.cpus)
            if kind == "tsv":
                parts, onray = got
        if not args.predict:
            return

        # -- the parts of the prediction ---------------------------------------------------------
        fixed = statistics.median(map_seconds(ray, 1) for _ in range(3))
        many = statistics.median(map_seconds(ray, 64) for _ in range(3))
        per_task = max(many - fixed, 0.0) * args.cpus / 64  # seconds of one slot per task
        part = plan_text(corpus, 4)[1]
        columns = TextColumns()
        t = time.perf_counter()
        scan_text_part(corpus, part, columns, work)
        r_scan = (part.stop - part.start) / (time.perf_counter() - t)
        path, _, _, _ = materialize(corpus, part, work)
        t = time.perf_counter()
        from_text.convert(
            path,
            work / "one-part",
            "bert-base-uncased",
            MAX_LENGTH,
            columns,
            ConvertOptions(progress=False, workers=1),
        )
        r_convert = (part.stop - part.start) / (time.perf_counter() - t)
        shards_per_part = len(stoker.open(work / "one-part").manifest.shards)
        small = [stoker.write(work / f"p{i}", {"x": np.arange(10)}) for i in range(100)]
        t = time.perf_counter()
        stoker.merge(small, work / "merged", verify=False)
        per_shard = (time.perf_counter() - t) / 100
        entry = (work / "merged" / "manifest.json").stat().st_size / 100  # bytes of manifest per shard (about)
        print(
            f"per-task cost: Ray tasks fixed {fixed:.2f} s, {per_task * 1000:.0f} ms of a slot per task; "
            f"one core: pre-pass {r_scan / 2**20:.1f} MiB/s, conversion {r_convert / 2**20:.2f} MiB/s "
            f"(partition of {(part.stop - part.start) / 2**20:.1f} MiB); merge {per_shard * 1000:.2f} ms per shard, "
            f"{entry:.0f} bytes of manifest per shard"
        )

        here = 2 * fixed + size / args.cpus * (1 / r_scan + 1 / r_convert) + 2 * math.ceil(parts / args.cpus) * per_task
        print(f"the model for this input on these {args.cpus} slots: {here:.1f} s (measured: median {onray:.1f} s)")
        total = args.tb * 1e12
        slots = args.nodes * args.cores
        partitions = on_ray.waves(math.ceil(total / on_ray.TEXT_PARTITION_BYTES), slots)
        work_s = total / slots * (1 / r_scan + 1 / r_convert)
        tasks_s = 2 * math.ceil(partitions / slots) * per_task
        merge_s = partitions * shards_per_part * (per_shard + args.nfs_ms / 1000)
        predicted = 2 * fixed + work_s + tasks_s + merge_s
        store_bytes = total * _store_ratio(work, part)
        print(
            f"PREDICTION for {args.tb:g} TB on {args.nodes} nodes x {args.cores} cores ({partitions:,} partitions, "
            f"{partitions * shards_per_part:,} shards, manifest {partitions * shards_per_part * entry / 1e6:.0f} MB; "
            f"merge at {per_shard * 1000:.2f} + {args.nfs_ms:g} ms of network file system metadata per shard): "
            f"{predicted / 3600:.1f} h = maps {2 * fixed:.0f} s + pre-pass and conversion {work_s / 3600:.1f} h "
            f"+ task overhead {tasks_s:.0f} s + merge {merge_s:.0f} s; needs a shared file system reading "
            f"{2 * total / work_s / 1e9:.1f} GB/s and writing {store_bytes / work_s / 1e9:.1f} GB/s"
        )
    finally:
        ray.shutdown()
        shutil.rmtree(work, ignore_errors=True)


def inputs(kind: str, corpus: Path, data: Path, work: Path) -> tuple[object, dict, str]:
    """The input of ``kind`` (tsv: the labelled corpus; text: friends.txt lines; images: the photos folder),
    the keywords of both conversions, and the unit counted."""
    if kind == "tsv":
        return corpus, {"max_length": MAX_LENGTH}, "rows"
    if kind == "text":
        src = data / "text" / "friends.txt"
        if not src.is_file():
            raise SystemExit(f"missing {src}: run python scripts/fetch_data.py text --out {data}")
        return src, {"max_length": MAX_LENGTH}, "lines"
    if kind == "images":
        src = data / "images" / "photos"
        if not src.is_dir():
            raise SystemExit(f"missing {src}: run python scripts/fetch_data.py images --out {data}")
        return src, {"mode": "resized", "size": 224}, "images"
    raise SystemExit(f"unknown kind {kind!r}: tsv, text or images")


def compare(kind: str, corpus: Path, data: Path, work: Path, rounds: int, partitions: int | None, cpus: int):
    """Single machine (``cpus`` threads) against Ray (``cpus`` slots), interleaved rounds; (partitions, Ray median)."""
    src, kw, unit = inputs(kind, corpus, data, work)
    single_fn = stoker.convert.text if kind != "images" else stoker.convert.images
    ray_fn = on_ray.text if kind != "images" else on_ray.images
    runs = {
        "single machine": lambda out: single_fn(src, out, progress=False, workers=cpus, **kw),
        "on Ray": lambda out: ray_fn(src, out, partitions=partitions, **kw),
    }
    times: dict[str, list[float]] = {n: [] for n in runs}
    cpu: dict[str, list[float]] = {n: [] for n in runs}  # the driver's CPU seconds, + the Ray tasks' processes
    rows, parts = {}, 0
    for r in range(rounds):
        order = list(runs) if r % 2 == 0 else list(reversed(runs))
        for name in order:
            out = work / f"store-{kind}-{name.replace(' ', '-')}"
            t, c = time.perf_counter(), time.process_time()
            result = runs[name](out)
            times[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c + sum(result.report.get("partition_cpu_seconds") or [0]))
            rows[name] = result.rows
            if name == "on Ray":
                parts = result.report["partitions"]
                phases = ", ".join(f"{k} {v:.2f} s" for k, v in result.report.get("phase_seconds", {}).items())
                tasks = ", ".join(f"{v:.2f}" for v in result.report.get("partition_seconds", {}).values())
                windows = ", ".join(f"{a:.2f}-{b:.2f}" for a, b in result.report.get("partition_windows", {}).values())
                print(f"  {kind} on Ray: {phases}; each partition's conversion in its task: {tasks} s")
                print(f"  {kind} on Ray: each task's start-end since the map began: {windows} s")
            shutil.rmtree(out)
        print(f"{kind} round {r + 1}: " + ", ".join(f"{n} {times[n][-1]:.2f} s" for n in runs))
    assert rows["single machine"] == rows["on Ray"], rows
    single, onray = (statistics.median(times[n]) for n in runs)
    best_s, best_r = (min(times[n]) for n in runs)
    print(
        f"{kind} ({rows['on Ray']:,} {unit}, {parts} partitions): median single {single:.2f} s, Ray {onray:.2f} s "
        f"-> {single / onray:.2f}x; best single {best_s:.2f} s, Ray {best_r:.2f} s -> {best_s / best_r:.2f}x "
        f"(target >= 0.8); load average {os.getloadavg()}"
    )
    c_single, c_ray = (statistics.median(cpu[n]) for n in runs)
    print(
        f"{kind} CPU seconds (median; Ray: the driver + its converting tasks' processes, not Ray's daemons): "
        f"single {c_single:.2f}, Ray {c_ray:.2f} -> {c_single / c_ray:.2f}x"
    )
    return parts, onray


def _store_ratio(work: Path, part) -> float:
    """Bytes of store per byte of input, from the converted partition."""
    stored = sum(s.bytes for s in stoker.open(work / "one-part").manifest.shards)
    return stored / (part.stop - part.start)


if __name__ == "__main__":
    main()
