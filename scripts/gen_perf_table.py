"""Write the performance table of README.md and docs/performance.md from the benchmark results in docs/data/.

Each ``docs/data/peers-*.json`` is one run of ``benchmarks/peers/run.py`` in its ``<out>.json`` layout
(``rows``: ``contender``, ``workload``, ``samples_per_s`` or ``error``; stoker's ``vs_peers``) plus the
run's ``date``, ``machine``, ``machine_short`` and ``command``. For every workload the table takes the
newest run that measured stoker on it: stoker's rate, the fastest peer of that run and stoker / peer
(the run's median of per-round ratios where it has one), and the physical limit (the highest limit row
of the newest run that measured one). Nothing is typed by hand: ``tests/docs/test_perf_table.py`` fails
when a page's table differs from what this script writes now.

Run: ``python scripts/gen_perf_table.py`` (``--check``: exit 1 if a page is stale). To add a run, copy
its ``results/peers.json`` to ``docs/data/peers-<date>.json`` and add ``date``, ``machine``,
``machine_short`` and ``command``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "data"
PAGES = (ROOT / "README.md", ROOT / "docs" / "performance.md")
START, END = "<!-- perf-table:start (scripts/gen_perf_table.py) -->", "<!-- perf-table:end -->"
WORKLOADS = {
    "text_bert": "raw text → BERT batches (Friends lines, max_length 128, batch 32)",
    "token_ids": "token ids, padded batches of 32",
    "images_jpeg": "JPEG photos → RandomResizedCrop(224) + flip, uint8, batch 128",
    "images_uint8": "uint8 224×224×3, batch 256",
    "tensors": "float32 3×32×32, batch 512",
}
LIMIT = "physical limit: "


def runs() -> list[dict]:
    """Every results file, oldest first (by date, then name)."""
    out = []
    for path in sorted(DATA.glob("peers-*.json")):
        run = json.loads(path.read_text(encoding="utf-8"))
        run["file"] = path.name
        out.append(run)
    return sorted(out, key=lambda r: (r["date"], r["file"]))


def _is_peer(name: str) -> bool:
    return not name.startswith("stoker") and not name.startswith(LIMIT)


def _rate(x: float) -> str:
    return f"{x:,.0f}"


def table(all_runs: list[dict]) -> list[str]:
    lines = [
        "| workload | stoker, samples/s | fastest peer | stoker / peer | physical limit | stoker / limit | run |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    used: dict[str, dict] = {}
    for workload, title in WORKLOADS.items():
        measured = [
            (run, r) for run in all_runs for r in run["rows"] if r["workload"] == workload and "samples_per_s" in r
        ]
        with_stoker = [run for run, r in measured if r["contender"] == "stoker"]
        if not with_stoker:
            continue
        run = with_stoker[-1]
        rows = [r for r in run["rows"] if r["workload"] == workload and "samples_per_s" in r]
        stoker = next(r for r in rows if r["contender"] == "stoker")
        peers = [r for r in rows if _is_peer(r["contender"])]
        best = max(peers, key=lambda r: r["samples_per_s"])
        ratio = stoker.get("vs_peers", {}).get(best["contender"], stoker["samples_per_s"] / best["samples_per_s"])
        limits = [(lr, r) for lr, r in measured if r["contender"].startswith(LIMIT)]
        if limits:
            limit_run = limits[-1][0]
            top = max((r for lr, r in limits if lr is limit_run), key=lambda r: r["samples_per_s"])
            when = "" if limit_run is run else f", {limit_run['date']}"
            limit = f"{top['contender'].removeprefix(LIMIT)}{when}: {_rate(top['samples_per_s'])}"
            share = f"{stoker['samples_per_s'] / top['samples_per_s']:.2f}×"
        else:
            limit, share = "not measured", "—"
        used[run["file"]] = run
        lines.append(
            f"| {title} | {_rate(stoker['samples_per_s'])} | {best['contender']}: {_rate(best['samples_per_s'])} "
            f"| **{ratio:.2f}×** | {limit} | {share} | {run['date']}, {run['machine_short']} |"
        )
    lines.append("")
    for run in sorted(used.values(), key=lambda r: r["date"]):
        lines.append(f"- {run['date']} (`docs/data/{run['file']}`): {run['machine']}; `{run['command']}`.")
    return lines


def render(text: str, block: list[str]) -> str:
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"no {START} ... {END} block to fill")
    return pattern.sub(lambda _: "\n".join([START, *block, END]), text)


def main(argv: list[str]) -> int:
    block = table(runs())
    stale = []
    for page in PAGES:
        old = page.read_text(encoding="utf-8")
        new = render(old, block)
        if new != old:
            stale.append(page)
            if "--check" not in argv:
                page.write_text(new, encoding="utf-8")
    if "--check" in argv and stale:
        sys.stderr.write(f"stale performance table in {', '.join(map(str, stale))}: run scripts/gen_perf_table.py\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
