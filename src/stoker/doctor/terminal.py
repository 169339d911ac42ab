"""The terminal summary of a report: a verdict line, rich tables of loaders, stages, resources and advice."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from stoker.doctor.report import Report, cost_line


def _mb(x: float | None) -> str:
    return "-" if x is None else f"{x / 1e6:,.1f} MB/s"


def render(report: Report, file: TextIO | None = None, width: int | None = None) -> None:
    """Print the summary with rich (colour only on a terminal)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    out = file or sys.stdout
    con = Console(file=out, width=width or (None if out.isatty() else 110), highlight=False, soft_wrap=False)
    style = {"input-bound": "bold red", "compute-bound": "bold green"}.get(report.verdict, "bold yellow")
    con.print(f"[{style}]stoker doctor: {report.verdict}[/] - {report.message}")
    if report.exit_code not in (None, 0):
        con.print(f"[yellow]the script exited with code {report.exit_code}; this report covers what ran[/]")
    if report.note:
        con.print(f"[yellow]{escape(report.note)}[/]")
    if report.loaders:
        con.print(f"bottleneck: stage [bold]{report.bottleneck_stage or '-'}[/]; resource {report.bottleneck_resource}")
        t = Table(title="loaders", title_justify="left")
        for col in (
            "loader",
            "steps",
            "data wait",
            "compute",
            "wait/step (median)",
            "compute/step (median)",
            "batch size",
            "workers",
        ):
            t.add_column(col, justify="left" if col == "loader" else "right", overflow="fold")
        for ld in report.loaders:
            wait, compute = f"{ld['wait_s']:.2f} s", f"{ld['compute_s']:.2f} s"
            wait_ms, compute_ms = f"{ld['wait_ms_median']:.2f} ms", f"{ld['compute_ms_median']:.2f} ms"
            size = "-" if ld.get("batch_size") is None else str(ld["batch_size"])
            workers = str(ld["info"]["num_workers"])
            t.add_row(ld["name"], str(ld["steps"]), wait, compute, wait_ms, compute_ms, size, workers)
        con.print(t)
        if report.ranks:
            con.print(_ranks(report))
        for ld in report.loaders:
            if ld["info"].get("schedule"):  # a stoker loader's: what it ran with, and who set it
                con.print(f"schedule of {ld['name']}: {ld['info']['schedule']}", soft_wrap=True)
        for ld in report.loaders:
            if ld["stages"]:
                st = Table(title=f"stages of {ld['name']}", title_justify="left")
                for col in ("stage", "total", "per call", "calls", "runs in"):
                    st.add_column(col, justify="left" if col in ("stage", "runs in") else "right")
                for row in ld["stages"]:
                    st.add_row(
                        row["stage"],
                        f"{row['total_s']:.3f} s",
                        f"{row['ms_per_call']:.2f} ms / {row.get('unit', 'call')}",
                        str(row["calls"]),
                        row["where"],
                    )
                con.print(st)
    con.print(_resources(report))
    for stall in report.stalls:
        con.print(f"[bold yellow]{escape(stall.verdict)}[/] ({escape(stall.loader)})", soft_wrap=True)
        con.print(f"  DataLoader: {stall.torch_fix}", markup=False, soft_wrap=True)
        con.print(f"  stoker: {stall.stoker_fix}", markup=False, soft_wrap=True)
    if report.recommendations:
        rt = Table(title="recommendations (most time to gain first)", title_justify="left", show_lines=True)
        several = len(report.loaders) > 1  # then each recommendation names its loader
        rt.add_column("#", justify="right")
        if several:
            rt.add_column("loader", overflow="fold")
        rt.add_column("change", overflow="fold")
        rt.add_column("evidence", overflow="fold")
        for i, r in enumerate(report.recommendations, 1):
            rt.add_row(str(i), *([r.loader] if several else []), r.title, r.evidence)
        con.print(rt)
        # The commands below the table, each on lines of its own that rich never breaks: copied, they run as printed.
        con.print("how (commands to copy):")
        for i, r in enumerate(report.recommendations, 1):
            con.print(f"{i}. {r.action}", markup=False, soft_wrap=True)
    elif report.no_advice:
        con.print(report.no_advice)
    for kind, path in report.files.items():
        con.print(f"{kind}: {path}")


def _ranks(report: Report) -> Any:
    from rich.table import Table

    t = Table(title="ranks", title_justify="left")
    for col in ("rank", "pid", "steps", "data wait", "compute", "wait share", "slowest stage", "CPU cores"):
        t.add_column(col, justify="left" if col == "slowest stage" else "right", overflow="fold")
    for r in report.ranks:
        cpu = "-" if r["cpu_cores"] is None else f"{r['cpu_cores']:.2f}"
        stage = f"{r['stage']} ({r['stage_ms']:.1f} ms / {r['stage_unit']})" if r["stage"] else "-"
        wait, compute, share = f"{r['wait_s']:.2f} s", f"{r['compute_s']:.2f} s", f"{100 * r['wait_share']:.0f} %"
        t.add_row(str(r["rank"]), str(r["pid"]), str(r["steps"]), wait, compute, share, stage, cpu)
    return t


def _resources(report: Report) -> Any:
    from rich.table import Table

    r = report.resources
    t = Table(title="resources (during the loop)", title_justify="left", show_header=False)
    t.add_column("what")
    t.add_column("value")
    if not r.get("samples"):
        t.add_row("samples", "none (the run was shorter than one interval)")
        t.add_row("GPU", report.gpu_status)
        return t
    t.add_row(
        "CPU, script + workers",
        f"{r['cpu_tree_cores']:.2f} of {r['cores']} cores (main process alone {r['cpu_root_cores']:.2f}); "
        f"{r['cpu_s_tree']:.1f} CPU-s in all, up to {r['procs_max']} processes",
    )
    t.add_row("CPU, whole machine", f"{r['cpu_machine_pct']:.0f} % busy, {r['iowait_pct']:.0f} % I/O wait")
    t.add_row(
        "memory (max)",
        f"PSS {r.get('pss_max', r['rss_max']) / 2**20:,.0f} MiB (shared pages once), USS "
        f"{r.get('uss_max', r['rss_max']) / 2**20:,.0f} MiB, RSS summed {r['rss_max'] / 2**20:,.0f} MiB",
    )
    t.add_row(
        "storage reads", f"script {_mb(r['read_bps'])}; disk {_mb(r['disk_read_bps'])}, {r['disk_iops']:.0f} reads/s"
    )
    gpu = report.gpu_status
    if "gpu_util_pct" in r:
        gpu += f": {r['gpu_util_pct']:.0f} % busy, memory up to {r['gpu_mem_max'] / 2**30:.1f} GiB, PCIe in {_mb(r.get('pcie_rx_bps'))}"
    t.add_row("GPU", gpu)
    t.add_row("wall time", f"{report.wall_s:.2f} s (loop {report.loop_s:.2f} s)")
    t.add_row("the doctor itself cost", cost_line(report))
    return t
