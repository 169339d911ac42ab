"""One order's epoch over a store, in a fresh process, for ``test_larger_than_ram.py``.

``python ltr_child.py PLAN.json``: the plan names the store, the order (``block``/``global``),
``block_size``, ``window``, how many batches to read (0: the whole epoch), the output file and,
optionally, a cgroup ``procs`` file. After the imports and the store's opening, the process
moves itself into that cgroup (so its limit bounds what the epoch adds: anonymous memory and
the page cache of the store, not the interpreter's imports), then reads. After every batch it
samples its anonymous memory (``RssAnon`` of ``/proc/self/status``). It writes: the rows seen,
whether each was seen once, the anonymous memory before and its peak during the epoch, the
major page faults, the bytes read from storage and the ``VmHWM``/``RssFile`` at the end.
"""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

import numpy as np

import stoker


def status() -> dict[str, int]:
    """``/proc/self/status`` memory fields in bytes."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if value.strip().endswith("kB"):
            out[key] = int(value.split()[0]) * 1024
    return out


def disk_reads() -> int:
    """Bytes this process caused to be read from storage (``read_bytes`` of ``/proc/self/io``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return -1


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    ds = stoker.open(plan["store"])
    order = dict(shuffle=plan["order"], block_size=plan["block_size"], window=plan["window"], seed=1)
    loader = stoker.Loader(ds, batch_size=256, num_workers=2, **order)  # 2 workers on any machine: the same buffers
    seen = np.zeros(len(ds), dtype=np.uint8)
    if plan.get("procs"):
        Path(plan["procs"]).write_text(str(__import__("os").getpid()))
    before = status()["RssAnon"]
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
    read_before = disk_reads()
    peak, batches = before, 0
    for batch in loader:
        rows = batch["label"].numpy()
        np.add.at(seen, rows, 1)
        peak = max(peak, status()["RssAnon"])
        batches += 1
        if batches == plan["batches"]:
            break
    end = status()
    result = {
        "rows": int((seen > 0).sum()),
        "twice": int((seen > 1).sum()),
        "batches": batches,
        "anon_before": before,
        "anon_peak": peak,
        "major_faults": resource.getrusage(resource.RUSAGE_SELF).ru_majflt - faults,
        "disk_read": disk_reads() - read_before,
        "hwm": end["VmHWM"],
        "rss_file": end["RssFile"],
    }
    Path(plan["out"]).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
