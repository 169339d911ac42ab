"""stoker against its peers, side by side, on the same machine, data and task.

    flock /tmp/stoker-bench.lock .venv/bin/python benchmarks/peers/run.py
        [--workloads text_bert,token_ids,images_jpeg,images_uint8,tensors] [--seconds 4]
        [--only stoker,WebDataset] [--data data] [--out results/peers] [--update] [--rounds 1]

Every (contender, workload) runs in its own process, in the environment that contender needs
(``ENVS``: peers that pin conflicting versions get their own venv). Each writes its own format
with its own writer, then loads shuffled batches on the CPU for ``--seconds``. Printed: a ratio
table (stoker = 1.0) with write time, bytes on disk, time to first batch (from the loader's
construction; the libraries imported before the clock starts, ``import_s`` in the JSON; the raw data and the
format dropped from the page cache first, so every contender starts cold), peak PSS and peak USS of the contender's process tree (shared pages counted once:
``child.py``) and the peak RSS summed over its processes (shared pages once per process); written:
``<out>.json`` and ``<out>.png``. A contender that cannot run says why in the table.

``--rounds N`` (N > 1) writes each format once and then loads it N times, the contenders of a
workload taking turns (their order reversed every other round), so that a machine whose load
changes from minute to minute weighs on all of them alike. Each row then gives the median of its
rounds (``rounds`` in the JSON holds them all), and stoker's ratio to a peer is the median of the
per-round ratios. Every row also records the CPU time its processes used per sample while loading
(``cpu_us_per_sample``: a measure of work that other load on the machine changes little) and the
1-minute load average at the end of its window.

Physical-limit rows, measured in the same run by this process (stoker's dev venv: it needs
stoker.text and stoker.vision): memcpy of the rows (array workloads), the bare ``tokenizers``
encode_batch rate (text_bert), and cores x one thread's decode + crop + resize (images_jpeg).
The real-data workloads need ``python scripts/fetch_data.py text images --out <data>``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))
from registry import contenders_for  # noqa: E402
from workloads import MAX_LENGTH, WORKLOADS, image_files, make_raw, texts  # noqa: E402

ENVS = {"peers": ".venv-peers", "mosaic": ".venv-mosaic", "ffcv": ".venv-ffcv"}
MEMORY = ("peak_pss_mb", "peak_pss_anon_mb", "peak_pss_shmem_mb", "peak_pss_file_mb", "peak_uss_mb", "peak_rss_mb")


def env_python(env: str) -> Path:
    root = Path(os.environ.get("STOKER_BENCH_VENVS", HERE.parent.parent))
    return root / ENVS[env] / "bin" / "python"


def memcpy_rate(raw: Path, batch: int, seconds: float = 1.0) -> float:
    """Rows per second that one thread can copy from memory (not cache): the limit of a loader
    that copies each row once. At least 256 MiB are copied per pass so caches do not flatter it."""
    x = np.load(raw / "x.npy", mmap_mode="r")
    rows = max(batch, -(-(256 * 2**20) // (x[0].nbytes)))
    src = np.ascontiguousarray(x[: min(rows, len(x))])
    dst = np.empty_like(src)
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        np.copyto(dst, src)
        reps += 1
    return reps * len(src) / (time.perf_counter() - t0)


def limit_rows(name: str, raw: Path, batch: int, seconds: float) -> list[dict]:
    """The physical-limit rows of one workload (see the module docstring)."""
    if name == "text_bert":
        import stoker.text
        from common import bare_passes

        tok = stoker.text.resolve("bert-base-uncased", max_length=MAX_LENGTH)
        n, dt = bare_passes(tok.tokenizer.encode_batch, texts(raw)[0])(seconds)
        return [
            {
                "contender": "physical limit: bare tokenizers encode_batch (all cores)",
                "workload": name,
                "samples_per_s": n / dt,
            }
        ]
    if name == "images_jpeg":
        from common import one_thread_images

        cores = len(os.sched_getaffinity(0))
        paths = sorted(set(image_files(raw)[0]))
        blobs = [Path(p).read_bytes() for p in paths]
        rows = []
        for full, how in ((False, "DCT-scaled decode, stoker's"), (True, "full simplejpeg decode")):
            rate = one_thread_images(blobs, seconds, full)
            rows.append(
                {
                    "contender": f"physical limit: {cores} cores x 1 thread ({how})",
                    "workload": name,
                    "samples_per_s": cores * rate,
                    "one_thread": rate,
                }
            )
        return rows
    if name == "token_ids":
        return []
    return [
        {"contender": "physical limit: memcpy (1 thread)", "workload": name, "samples_per_s": memcpy_rate(raw, batch)}
    ]


def run_one(contender: str, workload: str, root: Path, seconds: float, keep: bool = False) -> dict:
    env = contenders_for(workload)[contender][0]
    python = env_python(env)
    if not python.exists():
        return {
            "contender": contender,
            "workload": workload,
            "error": f"its environment {ENVS[env]} is not built (make bench builds it)",
        }
    cmd = [
        str(python),
        str(HERE / "child.py"),
        "--contender",
        contender,
        "--workload",
        workload,
        "--root",
        str(root),
        "--seconds",
        str(seconds),
        *(["--keep"] if keep else []),
    ]
    # Output goes to files and the wait is for the child itself, not for the end of its output:
    # worker processes it leaves behind (os._exit skips loaders' shutdown; some peers' workers
    # notice a dead parent only after minutes) would hold pipes open. They are then killed with
    # the child's process group.
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, start_new_session=True)
        try:
            proc.wait(timeout=1200)
        except subprocess.TimeoutExpired:
            proc.kill()
            return {"contender": contender, "workload": workload, "error": "timed out after 20 minutes"}
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        out.seek(0)
        err.seek(0)
        lines = [line for line in out.read().splitlines() if line.startswith("{")]
        if not lines:
            return {
                "contender": contender,
                "workload": workload,
                "error": f"exited {proc.returncode}: {err.read().strip()[-300:]}",
            }
    return json.loads(lines[-1])


def work_dir(root: Path, workload: str, contender: str) -> Path:
    """Where child.py writes ``contender``'s format of ``workload`` (its naming)."""
    return root / workload / "".join(c if c.isalnum() else "_" for c in contender)


def merge_rounds(rounds: list[list[dict]]) -> list[dict]:
    """One row per (workload, contender) from the rows of each round: the first round's row (its
    write time, disk size) with ``samples_per_s``, ``first_batch_s``, ``cpu_us_per_sample`` and the memory
    figures (``MEMORY``) the medians of the rounds that measured it, ``rounds`` the per-round rates,
    ``first_batch_rounds``, ``peak_pss_rounds``, ... each round's figure, ``load_averages`` the loads, and
    for stoker ``vs_peers``: per peer, the median of the per-round ratios stoker / peer."""
    merged: dict[tuple[str, str], dict] = {}
    per: dict[tuple[str, str], list[dict]] = {}
    for rows in rounds:
        for r in rows:
            key = (r["workload"], r["contender"])
            merged.setdefault(key, dict(r))
            per.setdefault(key, []).append(r)
    for key, row in merged.items():
        ok = [r for r in per[key] if "samples_per_s" in r]
        if not ok:
            continue
        row.pop("error", None)
        row["rounds"] = [r["samples_per_s"] for r in ok]
        row["samples_per_s"] = float(np.median(row["rounds"]))
        cpu = [r["cpu_us_per_sample"] for r in ok if "cpu_us_per_sample" in r]
        if cpu:
            row["cpu_us_per_sample"] = float(np.median(cpu))
        for k in ("first_batch_s", *MEMORY):  # medians, and every round's value under <key without _s/_mb>_rounds
            values = [r[k] for r in ok if k in r]
            if values:
                row[k], row[k.rsplit("_", 1)[0] + "_rounds"] = float(np.median(values)), values
        row["load_averages"] = [r["load_average"] for r in ok if "load_average" in r]
        for k in ("write_s", "bytes_on_disk"):
            if k not in row and any(k in r for r in ok):
                row[k] = next(r[k] for r in ok if k in r)
    for (workload, name), row in merged.items():
        if name != "stoker" or "rounds" not in row:
            continue
        ratios = {}
        for (w, peer), other in merged.items():
            if w != workload or not is_peer(peer) or "rounds" not in other:
                continue
            pairs = [
                (a["samples_per_s"], b["samples_per_s"])
                for a, b in zip(per[(w, name)], per[(w, peer)])
                if "samples_per_s" in a and "samples_per_s" in b
            ]
            if pairs:
                ratios[peer] = float(np.median([a / b for a, b in pairs]))
        row["vs_peers"] = ratios
    return list(merged.values())


def print_table(rows: list[dict]) -> None:
    header = f"{'workload':<13} {'contender':<58} {'samples/s':>11} {'vs stoker':>9} {'write s':>8} {'disk MB':>8} {'1st batch s':>11} {'PSS MB':>7} {'USS MB':>7} {'RSS sum MB':>10} {'CPU us/sample':>13}"
    print(header)
    for workload in dict.fromkeys(r["workload"] for r in rows):
        group = [r for r in rows if r["workload"] == workload]
        base = next((r.get("samples_per_s") for r in group if r["contender"] == "stoker"), None)
        for r in group:
            if "error" in r:
                print(f"{workload:<13} {r['contender']:<58} {'-':>11} {'-':>9}  not measured: {r['error'][:120]}")
                continue
            ratio = f"{r['samples_per_s'] / base:.2f}x" if base else "-"
            opt = lambda k, f, r=r: f.format(r[k]) if k in r else "-"  # noqa: E731
            print(
                f"{workload:<13} {r['contender']:<58} {r['samples_per_s']:>11,.0f} {ratio:>9} {opt('write_s', '{:.1f}'):>8} "
                f"{r.get('bytes_on_disk', 0) / 1e6:>8.0f} {opt('first_batch_s', '{:.2f}'):>11} {opt('peak_pss_mb', '{:.0f}'):>7} {opt('peak_uss_mb', '{:.0f}'):>7} {opt('peak_rss_mb', '{:.0f}'):>10}"
                f" {opt('cpu_us_per_sample', '{:.2f}'):>13}"
                + (f"  rounds: {', '.join(f'{x:,.0f}' for x in r['rounds'])}" if len(r.get("rounds", ())) > 1 else "")
                + (
                    f"; 1st batch: {', '.join(f'{x:.2f}' for x in r['first_batch_rounds'])}"
                    if len(r.get("first_batch_rounds", ())) > 1
                    else ""
                )
            )


def is_peer(name: str) -> bool:
    return not name.startswith("stoker") and not name.startswith("physical limit")


def best_peers(rows: list[dict]) -> dict[str, tuple[str, float]]:
    """workload -> (fastest peer, stoker / that peer); over several rounds, the median of the
    per-round ratios to the peer with the highest median rate."""
    out = {}
    for workload in dict.fromkeys(r["workload"] for r in rows):
        group = [r for r in rows if r["workload"] == workload and "samples_per_s" in r]
        base = next((r["samples_per_s"] for r in group if r["contender"] == "stoker"), None)
        peers = [r for r in group if is_peer(r["contender"])]
        if base and peers:
            best = max(peers, key=lambda r: r["samples_per_s"])
            stoker_row = next(r for r in group if r["contender"] == "stoker")
            ratio = stoker_row.get("vs_peers", {}).get(best["contender"], base / best["samples_per_s"])
            out[workload] = (best["contender"], ratio)
    return out


def markdown(rows: list[dict], day: str) -> str:
    """The README's tables: samples/s (fraction of stoker) per workload, then the costs."""
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    names = list(dict.fromkeys(r["contender"] for r in rows))
    cell = {(r["contender"], r["workload"]): r for r in rows}
    base = {w: cell[("stoker", w)].get("samples_per_s") for w in workloads if ("stoker", w) in cell}
    lines = [
        f"Samples/s and each as a fraction of stoker ({day}):",
        "",
        "| contender | " + " | ".join(workloads) + " |",
        "| --- |" + " --- |" * len(workloads),
    ]
    for name in names:
        cells = []
        for w in workloads:
            r = cell.get((name, w))
            if r is None:
                cells.append("–")
            elif "error" in r:
                reason = r["error"].split(": ", 1)[-1].replace("|", "/")
                cells.append("not measured: " + (reason.split(" (")[0] if len(reason) > 100 else reason))
            else:
                cells.append(
                    f"{r['samples_per_s']:,.0f} ({r['samples_per_s'] / base[w]:.2f}×)"
                    if base.get(w)
                    else f"{r['samples_per_s']:,.0f}"
                )
        lines.append(f"| {name.replace('_', chr(92) + '_')} | " + " | ".join(cells) + " |")
    best = best_peers(rows)
    lines += [
        "",
        "stoker vs the fastest peer: "
        + "; ".join(f"{w} {ratio:.2f}× ({peer})" for w, (peer, ratio) in best.items())
        + ".",
    ]
    lines += [
        "",
        "Costs: write/convert s · MB on disk · time to first batch s · peak PSS MB (the process tree, shared pages once)"
        " · peak USS MB (pages no other process maps) · peak RSS MB summed over the processes:",
        "",
        "| contender | " + " | ".join(workloads) + " |",
        "| --- |" + " --- |" * len(workloads),
    ]
    for name in names:
        if name.startswith("physical limit"):
            continue
        cells = []
        for w in workloads:
            r = cell.get((name, w))
            ok = r is not None and "samples_per_s" in r
            cells.append(
                f"{r.get('write_s', 0):.1f} · {r.get('bytes_on_disk', 0) / 1e6:.0f} · {r['first_batch_s']:.2f} · "
                f"{_mb(r, 'peak_pss_mb')} · {_mb(r, 'peak_uss_mb')} · {_mb(r, 'peak_rss_mb')}"
                if ok
                else "–"
            )
        lines.append(f"| {name.replace('_', chr(92) + '_')} | " + " | ".join(cells) + " |")
    if any("cpu_us_per_sample" in r for r in rows):
        lines += [
            "",
            "CPU µs per sample while loading (all the contender's threads and worker processes):",
            "",
            "| contender | " + " | ".join(workloads) + " |",
            "| --- |" + " --- |" * len(workloads),
        ]
        for name in names:
            if name.startswith("physical limit"):
                continue
            cells = [
                f"{cell[(name, w)]['cpu_us_per_sample']:.2f}" if "cpu_us_per_sample" in cell.get((name, w), {}) else "–"
                for w in workloads
            ]
            lines.append(f"| {name.replace('_', chr(92) + '_')} | " + " | ".join(cells) + " |")
    return "\n".join(lines + startup(rows)) + "\n"


def startup(rows: list[dict]) -> list[str]:
    """Per workload: each contender's time to first batch (median, the rounds' range) and peak PSS
    (median) with its parts, anonymous · shared memory · mapped files, and peak USS."""
    lines = []
    for workload in dict.fromkeys(r["workload"] for r in rows):
        lines += [
            "",
            f"{workload}: first batch s (median; min-max of the rounds) · peak PSS MB = anon + shm + file · USS MB:",
            "",
            "| contender | first batch s | PSS MB | anon | shm | file | USS MB |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in rows:
            if r["workload"] != workload or "first_batch_s" not in r:
                continue
            first = r.get("first_batch_rounds", [r["first_batch_s"]])
            mb = [_mb(r, f"peak_{k}_mb") for k in ("pss", "pss_anon", "pss_shmem", "pss_file", "uss")]
            spread = f" ({min(first):.2f}-{max(first):.2f})" if len(first) > 1 else ""
            lines.append(f"| {r['contender']} | {r['first_batch_s']:.2f}{spread} | " + " | ".join(mb) + " |")
    return lines


def _mb(row: dict, key: str) -> str:
    return f"{row[key]:.0f}" if key in row else "–"


def chart(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = [r["workload"] for r in rows if "samples_per_s" in r]  # a workload whose contenders all failed: no panel
    workloads = list(dict.fromkeys(measured))
    sizes = [measured.count(w) for w in workloads]
    fig, axes = plt.subplots(
        len(workloads),
        1,
        figsize=(9, sum(0.22 * n + 0.9 for n in sizes)),
        squeeze=False,
        gridspec_kw={"height_ratios": sizes},
    )
    for ax, workload in zip(axes[:, 0], workloads):
        group = [r for r in rows if r["workload"] == workload and "samples_per_s" in r]
        base = next((r["samples_per_s"] for r in group if r["contender"] == "stoker"), None) or 1.0
        names = [r["contender"] for r in group]
        ratios = [r["samples_per_s"] / base for r in group]
        colors = [
            "#d9480f"
            if n == "stoker"
            else "#f08c00"
            if n.startswith("stoker")
            else "#868e96"
            if "limit" in n
            else "#4263eb"
            for n in names
        ]
        ax.barh(names[::-1], ratios[::-1], color=colors[::-1])
        ax.set_xscale("log")
        ax.set_xlim(min(0.005, min(ratios) / 1.5), max(30, max(ratios) * 3))
        ticks = [t for t in (0.01, 0.1, 1, 10) if ax.get_xlim()[0] < t < ax.get_xlim()[1]]
        ax.set_xticks(ticks, [f"{t:g}×" for t in ticks])
        ax.minorticks_off()
        for y, value in enumerate(ratios[::-1]):
            ax.text(value, y, f" {value:.2f}×", va="center", fontsize=7)
        ax.axvline(1.0, color="black", lw=0.8)
        ax.set_title(f"{workload}: {WORKLOADS[workload].description}", fontsize=8, loc="right")
        ax.tick_params(labelsize=8)
        ax.set_xlabel("throughput relative to stoker (log scale, higher is faster)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument(
        "--only",
        default=None,
        help='comma-separated contenders, and "limits" for the physical-limit rows (default: all)',
    )
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--root", default="/tmp/stoker-peers", help="scratch directory for data and formats")
    ap.add_argument("--data", default="data", help="where scripts/fetch_data.py put the real text and photos")
    ap.add_argument("--out", default="results/peers")
    ap.add_argument(
        "--update", action="store_true", help="replace only the measured rows in an existing <out>.json, then redraw"
    )
    ap.add_argument(
        "--rounds", type=int, default=1, help="load each format this many times, contenders taking turns (medians)"
    )
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    root = Path(args.root)
    keep = args.rounds > 1
    rounds: list[list[dict]] = []
    try:
        for n in range(args.rounds):
            rows: list[dict] = []
            for name in args.workloads.split(","):
                w = WORKLOADS[name]
                raw = make_raw(w, root, Path(args.data))
                chosen = [c for c in contenders_for(name) if args.only is None or c in args.only.split(",")]
                for contender in chosen if n % 2 == 0 else chosen[::-1]:
                    print(f"[{name}] {contender} (round {n + 1}) ...", file=sys.stderr, flush=True)
                    rows.append(run_one(contender, name, root, args.seconds, keep))
                if args.only is None or "limits" in args.only.split(","):
                    rows.extend(
                        dict(r, load_average=os.getloadavg()[0])
                        for r in limit_rows(name, raw, w.batch_size, args.seconds)
                    )
            rounds.append(rows)
    finally:
        if keep:
            for name in args.workloads.split(","):
                for contender in contenders_for(name):
                    shutil.rmtree(work_dir(root, name, contender), ignore_errors=True)
    rows = merge_rounds(rounds) if len(rounds) > 1 else rounds[0]
    out = Path(args.out)
    if args.update and out.with_suffix(".json").is_file():
        new = {(r["workload"], r["contender"]): r for r in rows}
        old = json.loads(out.with_suffix(".json").read_text())["rows"]
        rows = [new.pop((r["workload"], r["contender"]), r) for r in old] + list(new.values())
    print(f"\nstoker vs peers, {date.today().isoformat()}, {os.cpu_count()} vCPU; batches on the CPU, shuffled\n")
    print_table(rows)
    if len(rounds) > 1:
        loads = [x for r in rows for x in r.get("load_averages", ())]
        print(
            f"\n{len(rounds)} rounds; medians; 1-minute load average {min(loads):.1f}-{max(loads):.1f}" if loads else ""
        )
    for workload, (peer, ratio) in best_peers(rows).items():
        print(
            f"{workload}: stoker {ratio:.2f}x the fastest peer ({peer}){'' if ratio >= 1.5 else f'; short of 1.5x by {1.5 / ratio:.2f}x'}"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"date": date.today().isoformat(), "rows": rows}, indent=2))
    chart(rows, out.with_suffix(".png"))
    out.with_suffix(".md").write_text(markdown(rows, date.today().isoformat()))
    print(f"\nwrote {out.with_suffix('.json')}, {out.with_suffix('.png')} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
