"""Ray conversion (``stoker.convert.on_ray.text``) on a local 2-CPU Ray against the single-machine conversion.

Data: the 20 Newsgroups TSVs (train then test, one header; ``scripts/fetch_data.py text``), written
``--repeat`` times into one labelled TSV; bert-base-uncased, ``max_length=128``. Contenders, each run
``--rounds`` times, alternating which goes first: ``stoker.convert.text`` (2 tokenizing threads) and
``stoker.convert.on_ray.text`` (default partitions, 1 CPU and 1 tokenizing thread per task) on a
Ray started once before (its start is printed apart: a cluster is running before a job). Prints
median seconds and the speed ratio single/ray (target >= 0.8).

Then the parts of a prediction for a cluster: the fixed cost of one Ray Data map (1 no-op task),
the cost per task (64 no-op tasks over the 2 slots), the pre-pass and conversion rates of one core
(one partition's scan, one partition converted with 1 thread), and the cost per shard of the merge
(100 one-shard parts linked); and the model

    T = 2 F + S / (N C) * (1 / r_scan + 1 / r_convert) + 2 (P / (N C)) o + P k m

(F fixed cost of a map, S input bytes, N nodes, C cores per node, P partitions of 64 MiB, o per-task
cost, k shards per partition, m merge cost per shard), evaluated for ``--tb`` TB on ``--nodes`` x
``--cores``. It is a prediction: it assumes a shared file system that keeps up (the bandwidth it
needs is printed) and cores as fast as these.

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
    return {"index": row["index"], "result": "", "error": b""}


def warm(row):
    """A worker's first import of the text converter (seconds of torch and tokenizers), done before timing."""
    import stoker.convert.from_text  # noqa: F401

    return row


def map_seconds(ray, n: int) -> float:
    ds = ray.data.from_items([{"index": i} for i in range(n)], override_num_blocks=n)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.map(noop, num_cpus=1, max_retries=0).take_all()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="data")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--tb", type=float, default=10.0)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--cores", type=int, default=16)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import ray

    work = Path(tempfile.mkdtemp(prefix="stoker-bench-ray-"))
    try:
        corpus = build_corpus(Path(args.data), work / "corpus.tsv", args.repeat)
        size = corpus.stat().st_size
        print(f"input: {corpus.name}, {size / 2**20:.1f} MiB; load average {os.getloadavg()}")
        t0 = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        ray.data.DataContext.get_current().enable_progress_bars = False
        print(f"ray.init (2 CPUs): {time.perf_counter() - t0:.1f} s (not counted below)")
        ray.data.from_items([{"index": i} for i in range(2)], override_num_blocks=2).map(warm, num_cpus=1).take_all()
        # the 2 workers started and stoker's converter imported in each, as on a cluster that runs before a job

        times: dict[str, list[float]] = {"single machine": [], "on Ray": []}
        runs = {
            "single machine": lambda out: stoker.convert.text(corpus, out, max_length=MAX_LENGTH, progress=False),
            "on Ray": lambda out: on_ray.text(corpus, out, max_length=MAX_LENGTH),
        }
        rows = {}
        for r in range(args.rounds):
            order = list(runs) if r % 2 == 0 else list(reversed(runs))
            for name in order:
                out = work / f"store-{name.replace(' ', '-')}"
                t = time.perf_counter()
                result = runs[name](out)
                times[name].append(time.perf_counter() - t)
                rows[name] = result.rows
                if name == "on Ray":
                    parts = result.report["partitions"]
                    phases = ", ".join(f"{k} {v:.1f} s" for k, v in result.report["phase_seconds"].items())
                    tasks = ", ".join(f"{v:.1f}" for v in result.report["partition_seconds"].values())
                    print(f"  on Ray: {phases}; each partition's conversion in its task: {tasks} s")
                shutil.rmtree(out)
            print(f"round {r + 1}: " + ", ".join(f"{n} {times[n][-1]:.1f} s" for n in runs))
        assert rows["single machine"] == rows["on Ray"], rows
        single, onray = (statistics.median(times[n]) for n in runs)
        print(
            f"median: single machine {single:.1f} s, on Ray {onray:.1f} s ({parts} partitions); "
            f"speed ratio on Ray / single = {single / onray:.2f}x (target >= 0.8); load average {os.getloadavg()}"
        )

        # -- the parts of the prediction ---------------------------------------------------------
        fixed = statistics.median(map_seconds(ray, 1) for _ in range(3))
        many = statistics.median(map_seconds(ray, 64) for _ in range(3))
        per_task = max(many - fixed, 0.0) * 2 / 64  # seconds of one slot per task
        part = plan_text(corpus, 4)[1]
        columns = TextColumns()
        t = time.perf_counter()
        scan_text_part(corpus, part, columns, work)
        r_scan = (part.stop - part.start) / (time.perf_counter() - t)
        path, _, _ = materialize(corpus, part, work)
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
        print(
            f"per-task cost: Ray Data map fixed {fixed:.2f} s, {per_task * 1000:.0f} ms of a slot per task; "
            f"one core: pre-pass {r_scan / 2**20:.1f} MiB/s, conversion {r_convert / 2**20:.2f} MiB/s "
            f"(partition of {(part.stop - part.start) / 2**20:.1f} MiB); merge {per_shard * 1000:.2f} ms per shard"
        )

        here = 2 * fixed + size / 2 * (1 / r_scan + 1 / r_convert) + 2 * math.ceil(parts / 2) * per_task
        print(f"the model for this input on these 2 slots: {here:.1f} s (measured: median {onray:.1f} s)")
        total = args.tb * 1e12
        slots = args.nodes * args.cores
        partitions = math.ceil(total / on_ray.TEXT_PARTITION_BYTES)
        work_s = total / slots * (1 / r_scan + 1 / r_convert)
        tasks_s = 2 * math.ceil(partitions / slots) * per_task
        merge_s = partitions * shards_per_part * per_shard
        predicted = 2 * fixed + work_s + tasks_s + merge_s
        store_bytes = total * _store_ratio(work, part)
        print(
            f"PREDICTION for {args.tb:g} TB on {args.nodes} nodes x {args.cores} cores ({partitions:,} partitions of "
            f"64 MiB): {predicted / 3600:.1f} h = maps {2 * fixed:.0f} s + pre-pass and conversion {work_s / 3600:.1f} h "
            f"+ task overhead {tasks_s:.0f} s + merge {merge_s:.0f} s; needs a shared file system reading "
            f"{2 * total / work_s / 1e9:.1f} GB/s and writing {store_bytes / work_s / 1e9:.1f} GB/s"
        )
    finally:
        ray.shutdown()
        shutil.rmtree(work, ignore_errors=True)


def _store_ratio(work: Path, part) -> float:
    """Bytes of store per byte of input, from the converted partition."""
    stored = sum(s.bytes for s in stoker.open(work / "one-part").manifest.shards)
    return stored / (part.stop - part.start)


if __name__ == "__main__":
    main()
