"""The HTML report: one self-contained file (inline CSS and SVG plots) that opens offline.

Plots (matplotlib, drawn on ``Figure`` objects, so pyplot's global state is never touched):
per-step data wait vs compute (one panel per loader), CPU / disk / GPU over time, and the stage
breakdown. Plots scale down to the page's width; loaders are told apart by their report labels
(distinct, see ``analysis.label_loaders``); lines that can coincide (the script's CPU and its main
process's without workers) differ in width and dash, so neither hides the other; every y axis
starts at 0.
"""

from __future__ import annotations

import html
import io
import os
import textwrap
from pathlib import Path
from typing import Any

from stoker.doctor.report import Report, cost_line

CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{font-size:1.5em} .verdict{font-size:1.3em;padding:.5em 1em;border-radius:6px;display:inline-block}
.input-bound{background:#fde2e1} .compute-bound{background:#e0f5e4} .none{background:#fff4d6}
table{border-collapse:collapse;margin:1em 0} td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3} code{background:#f5f5f5;padding:1px 3px} figure{margin:1em 0} .muted{color:#777}
td{overflow-wrap:anywhere} figure svg{max-width:100%;height:auto;display:block} .loader{display:inline-block;min-width:10em}
"""


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg") :]


BARS = 500  # the steps plot's bars per loader at most: a longer run gets one bar per run of steps


def step_bars(steps: list[Any]) -> tuple[Any, Any, Any, Any, int]:
    """Per bar of the steps plot: its first step, the mean data wait and compute of its steps (ms), the
    slowest data wait among them (ms), and how many steps a bar holds (1 while there are at most ``BARS``)."""
    import numpy as np

    wait = 1000 * np.array([s.wait for s in steps], dtype=np.float64)
    comp = 1000 * np.array([s.compute_before for s in steps[1:]] + [0.0], dtype=np.float64)  # until the next fetch
    per = -(-len(steps) // BARS)
    first = np.arange(0, len(steps), per)
    count = np.diff(np.append(first, len(steps)))
    return (
        first,
        np.add.reduceat(wait, first) / count,
        np.add.reduceat(comp, first) / count,
        np.maximum.reduceat(wait, first),
        per,
    )


def steps_figure(report: Report) -> Any:
    """The steps plot as a matplotlib Figure (every step of every loader), or None when there is nothing to draw."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    loaders = [st for st in report._stats.values() if st.steps]
    if not loaders:
        return None
    loaders.sort(key=lambda st: st.steps[0].requested)
    fig = Figure(figsize=(10, 0.6 + 2.6 * len(loaders)))
    axes = fig.subplots(len(loaders), 1, squeeze=False)[:, 0]
    for ax, st in zip(axes, loaders):  # one panel per loader: bars of two loaders never cover each other
        first, wait, comp, slowest, per = step_bars(st.steps)
        ax.bar(first, wait, width=per, align="edge", color="#d9534f", label="data wait")
        ax.bar(first, comp, width=per, align="edge", bottom=wait, color="#5cb85c", label="compute until the next fetch")
        handles = ax.get_legend_handles_labels()
        if per > 1:  # on its own axis: one long stall does not flatten the means
            slow = ax.twinx()
            slow.step(first, slowest, where="post", color="#333333", linewidth=0.8, label="slowest data wait (right)")
            slow.set_ylabel("slowest wait, ms")
            slow.set_ylim(bottom=0)
            more = slow.get_legend_handles_labels()
            handles = (handles[0] + more[0], handles[1] + more[1])
        ax.set_title(textwrap.shorten(st.name, 110), fontsize="medium", loc="left")
        ax.set_ylabel("ms" if per == 1 else f"ms, mean of {per:,} steps")
        ax.set_ylim(bottom=0)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(*handles, loc="upper right", fontsize="small")
    axes[-1].set_xlabel("step")
    fig.suptitle("per step: waiting for data (red) vs compute until the next fetch (green)")
    return fig


def resources_figure(report: Report) -> Any:
    """The resources plot as a matplotlib Figure, or None when there is nothing to draw."""
    from matplotlib.figure import Figure

    s = report.samples
    if not s:
        return None
    t = [x["t"] for x in s]
    has_gpu = any(x.get("gpu") for x in s)
    fig = Figure(figsize=(10, 7 if has_gpu else 5))
    axes = fig.subplots(3 if has_gpu else 2, 1, sharex=True)
    ax = axes[0]
    cores = max((len(x["cpu_cores"]) for x in s), default=1)
    # wide and pale under narrow and dashed: equal lines (no workers) both stay visible
    ax.plot(t, [x["cpu_tree"] for x in s], label="script + workers", linewidth=4, alpha=0.45)
    ax.plot(t, [x["cpu_root"] for x in s], label="main process", linewidth=1.5, linestyle="--")
    ax.plot(t, [sum(x["cpu_cores"]) / 100 for x in s], label="whole machine", linewidth=1.2, linestyle=":")
    ax.set_ylabel("CPU cores busy")
    ax.set_ylim(0, cores * 1.05)
    ax.legend(fontsize="small")
    ax = axes[1]
    ax.plot(t, [x["disk_read_bps"] / 1e6 for x in s], label="disk reads MB/s", linewidth=4, alpha=0.45)
    ax.plot(t, [x["read_bps"] / 1e6 for x in s], label="script reads MB/s", linewidth=1.5, linestyle="--")
    ax.set_ylabel("MB/s")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize="small")
    if has_gpu:
        ax = axes[2]
        ax.plot(t, [x["gpu"][0].get("util", 0) if x.get("gpu") else 0 for x in s], label="GPU 0 utilization %")
        ax.plot(
            t,
            [x["gpu"][0].get("pcie_rx_bps", 0) / 1e9 if x.get("gpu") else 0 for x in s],
            label="PCIe in GB/s",
            linestyle="--",
        )
        ax.set_ylim(bottom=0)
        ax.legend(fontsize="small")
    axes[-1].set_xlabel("seconds since start")
    for lo, hi in _loop_spans(report):
        for a in axes:
            a.axvspan(lo, hi, color="#eee", zorder=0)
    fig.suptitle("resources over time (grey: the training loop)")
    return fig


def _loop_spans(report: Report) -> list[tuple[float, float]]:
    steps = [st.steps for st in report._stats.values() if st.steps]
    if not steps:
        return []
    return [(min(s[0].requested for s in steps) - report.origin, max(s[-1].ready for s in steps) - report.origin)]


def stages_figure(report: Report) -> Any:
    """The stages plot as a matplotlib Figure, or None when there is nothing to draw."""
    from matplotlib.figure import Figure

    rows = [(f"{ld['name']}: {r['stage']}", r["total_s"]) for ld in report.loaders for r in ld["stages"]]
    if not rows:
        return None
    rows = sorted(rows, key=lambda r: r[1])[-12:]
    labels = [textwrap.fill(r[0], 48) for r in rows]  # wrapped: long labels do not widen the figure
    fig = Figure(figsize=(10, 0.8 + 0.25 * sum(label.count("\n") + 2 for label in labels)))
    ax = fig.add_subplot()
    ax.barh(range(len(rows)), [r[1] for r in rows], color="#337ab7")  # by position: equal labels stay two bars
    ax.set_yticks(range(len(rows)), labels, fontsize="small")
    ax.set_xlabel("seconds (worker stages summed over workers)")
    ax.set_title("stage breakdown")
    return fig


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _loaders_table(report: Report) -> str:
    headers = [
        "loader",
        "steps",
        "data wait s",
        "compute s",
        "wait ms/step",
        "compute ms/step",
        "batch size",
        "workers",
    ]
    rows = []
    for ld in report.loaders:
        wait, compute = f"{ld['wait_s']:.3f}", f"{ld['compute_s']:.3f}"
        wait_ms, compute_ms = f"{ld['wait_ms_median']:.2f}", f"{ld['compute_ms_median']:.2f}"
        workers, size = ld["info"]["num_workers"], ld.get("batch_size")
        size = "-" if size is None else size
        rows.append([html.escape(ld["name"]), ld["steps"], wait, compute, wait_ms, compute_ms, size, workers])
    return _table(headers, rows)


def render_html(report: Report) -> str:
    e = html.escape
    cls = report.verdict if report.verdict in ("input-bound", "compute-bound") else "none"
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>stoker doctor report</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>stoker doctor</h1>",
        f"<p class='muted'>command: <code>{e(' '.join(report.command or ['(in-process)']))}</code>; exit code {report.exit_code}; "
        f"wall time {report.wall_s:.2f} s; GPU: {e(report.gpu_status)}</p>",
        f"<p class='muted' id='cost'>the doctor itself cost: {e(cost_line(report))}</p>",
        f"<div class='verdict {cls}' id='verdict'>{e(report.verdict)}</div>",
        f"<p id='message'>{e(report.message)}</p>",
    ]
    if report.loaders:
        parts.append(
            f"<p>bottleneck stage: <b>{e(report.bottleneck_stage or '-')}</b>; resource: {e(report.bottleneck_resource or '-')}</p>"
        )
        parts.append("<h2>Recommendations</h2>")
        parts.append(
            f"<p id='no-recommendations'>{e(report.no_advice)}</p>"
            if report.no_advice
            else _table(
                ["#", "loader", "change", "evidence", "how"],
                [
                    [
                        i,
                        f"<span class='loader'>{e(r.loader)}</span>",
                        e(r.title),
                        e(r.evidence),
                        f"<code>{e(r.action)}</code>",
                    ]
                    for i, r in enumerate(report.recommendations, 1)
                ],
            )
        )
        if report.stalls:
            parts.append("<h2 id='stalls'>Stalls</h2>")
            rows = [
                [e(x.verdict), e(x.loader), f"<code>{e(x.torch_fix)}</code>", f"<code>{e(x.stoker_fix)}</code>"]
                for x in report.stalls
            ]
            parts.append(_table(["found", "where", "change (DataLoader)", "change (stoker)"], rows))
        parts.append("<h2>Loaders</h2>")
        parts.append(_loaders_table(report))
        if report.ranks:
            parts.append("<h2 id='ranks'>Ranks</h2>")
            keys = ["rank", "pid", "steps", "wait_s", "compute_s", "wait_share", "stage", "cpu_cores"]
            rows = [[e(f"{r[k]:.3f}" if isinstance(r[k], float) else str(r[k])) for k in keys] for r in report.ranks]
            parts.append(_table(keys, rows))
    for title, fig in (
        ("Steps", steps_figure(report)),
        ("Resources", resources_figure(report)),
        ("Stages", stages_figure(report)),
    ):
        if fig is not None:
            parts.append(f"<h2>{title}</h2><figure class='plot' id='plot-{title.lower()}'>{_svg(fig)}</figure>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_html(report: Report, path: str | os.PathLike) -> Path:
    path = Path(path)
    path.write_text(render_html(report), encoding="utf-8")
    return path
