"""``ResourceSampler``: CPU, memory, disk and GPU of a process tree, sampled in a background thread.

Each sample (a dict) holds ``t`` (perf_counter), ``cpu_tree`` (cores busy in the process and all
its descendants, DataLoader workers included), ``cpu_root`` (the process alone), ``cpu_cores``
(% busy per core, whole machine), ``iowait`` (% of CPU time waiting on I/O, whole machine),
``rss`` (bytes, summed over the tree: shared pages once per process), ``pss`` and ``uss``
(bytes, whole tree, shared pages counted once: :mod:`stoker.pipeline.memory`; each process's figures
as last read, see below), ``procs``, ``read_bps`` (bytes/s the tree read from storage),
``disk_read_bps`` and ``disk_iops`` (reads/s, whole machine), and ``gpu`` (a list per device of
``util``, ``mem_util``, ``mem_used``, ``mem_total``, ``pcie_rx_bps``, ``pcie_tx_bps``) where
NVML finds a driver. Without one, ``gpu_status`` says "no GPU (...)" and sampling goes on.
Per process of the tree, ``mem`` lists ``[pid, uss, pss, cpu_s]`` (bytes private to it, its
proportional share of shared pages: a forked worker's copied-on-access pages show as USS, and the
CPU seconds it has used; USS and PSS are null in samples where they were not read: each costs a
page-table walk, so a process is read again only after 100 times what the last reads of the whole
tree cost, times ``1 + t / 60 s`` where ``t`` is how long the sampler has run: at most 1 % of a core
however many workers in the first minute, 0.1 % after ten; the reads of a run grow with the
logarithm of its length, so an hour still has over a hundred of each process), and
``shm_managers`` counts the tree's ``torch_shm_manager`` processes; ``shm_files`` and
``shm_bytes`` are the entries of ``/dev/shm`` (whole machine; absent where there is none).

A process that exits between two samples loses its CPU of that last interval.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import psutil

from stoker.pipeline.memory import Memory, descendants, process_memory

USS_BUDGET = 100  # a process's USS/PSS is read again after this many times the last reads of the tree cost
USS_SLOWDOWN_S = 60.0  # ... times 1 + (seconds sampled) / this: the reads thin out as a run goes on


class _Gpus:
    """NVML handles, or the reason there are none."""

    def __init__(self) -> None:
        self.nvml: Any = None
        self.handles: list[Any] = []
        self.status = "no GPU"
        try:
            import pynvml
        except ImportError:
            self.status = "no GPU (nvidia-ml-py is not installed: pip install 'stoker[doctor]')"
            return
        try:
            pynvml.nvmlInit()
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            names = [pynvml.nvmlDeviceGetName(h) for h in self.handles]
        except pynvml.NVMLError as exc:
            self.status = f"no GPU (NVML: {exc})"
            self.handles = []
            return
        self.nvml = pynvml
        self.status = (
            ", ".join(n.decode() if isinstance(n, bytes) else str(n) for n in names) or "no GPU (NVML sees no device)"
        )

    def sample(self) -> list[dict[str, float]]:
        nv = self.nvml
        out = []
        for h in self.handles:
            row: dict[str, float] = {}
            try:
                u = nv.nvmlDeviceGetUtilizationRates(h)
                m = nv.nvmlDeviceGetMemoryInfo(h)
                row.update(
                    util=float(u.gpu), mem_util=float(u.memory), mem_used=float(m.used), mem_total=float(m.total)
                )
            except nv.NVMLError:
                pass
            try:  # KB/s over a 20 ms window; not every device reports it
                row["pcie_rx_bps"] = 1024.0 * nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_RX_BYTES)
                row["pcie_tx_bps"] = 1024.0 * nv.nvmlDeviceGetPcieThroughput(h, nv.NVML_PCIE_UTIL_TX_BYTES)
            except nv.NVMLError:
                pass
            out.append(row)
        return out

    def close(self) -> None:
        if self.nvml is not None:
            try:
                self.nvml.nvmlShutdown()
            except self.nvml.NVMLError:
                pass
            self.nvml = None


class ResourceSampler:
    """Samples the tree rooted at ``pid`` every ``interval`` seconds until ``stop()``."""

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        self.pid = pid
        self.interval = float(interval)
        self.samples: list[dict[str, Any]] = []
        self.gpu_status = "not sampled"
        self.cpu_s = 0.0  # CPU seconds the sampling thread used: the doctor's own cost in this process
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cpu: dict[int, float] = {}
        self._io: dict[int, int] = {}
        self._procs: dict[int, psutil.Process] = {}
        self._uss_due: dict[int, float] = {}  # pid -> when its USS/PSS may be read again
        self._uss_cost: dict[int, float] = {}  # pid -> seconds its last USS/PSS read took
        self._last_memory: dict[int, Memory] = {}  # pid -> its last figures read
        self._t0 = time.perf_counter()  # reset by start(): memory reads thin out from there

    def start(self) -> ResourceSampler:
        if self._thread is None:
            self._t0 = time.perf_counter()
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="stoker-doctor-sampler", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> list[dict[str, Any]]:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        return self.samples

    def _run(self) -> None:
        started = time.thread_time()
        try:
            self._sample_all()
        finally:
            self.cpu_s = time.thread_time() - started

    def _sample_all(self) -> None:
        gpus = _Gpus()
        self.gpu_status = gpus.status
        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            gpus.close()
            return
        psutil.cpu_percent(percpu=True)
        last_t, last_disk, last_cpu = time.perf_counter(), psutil.disk_io_counters(), psutil.cpu_times()
        self._tree(root)  # baselines
        try:
            while not self._stop.wait(self.interval):
                now = time.perf_counter()
                dt = max(now - last_t, 1e-6)
                cpu_tree, cpu_root, memory, read, procs, mem, managers = self._tree(root)
                disk, cpu = psutil.disk_io_counters(), psutil.cpu_times()
                total = sum(cpu) - sum(last_cpu)
                sample: dict[str, Any] = {
                    "t": now,
                    "cpu_tree": cpu_tree / dt,
                    "cpu_root": cpu_root / dt,
                    "cpu_cores": psutil.cpu_percent(percpu=True),
                    "iowait": 100.0 * (getattr(cpu, "iowait", 0.0) - getattr(last_cpu, "iowait", 0.0)) / total
                    if total > 0
                    else 0.0,
                    "rss": memory.rss,
                    "pss": memory.pss,
                    "uss": memory.uss,
                    "procs": procs,
                    "read_bps": read / dt,
                    "disk_read_bps": (disk.read_bytes - last_disk.read_bytes) / dt if disk and last_disk else 0.0,
                    "disk_iops": (disk.read_count - last_disk.read_count) / dt if disk and last_disk else 0.0,
                    "mem": mem,
                    "shm_managers": managers,
                    **_shm(),
                }
                if gpus.handles:
                    sample["gpu"] = gpus.sample()
                self.samples.append(sample)
                last_t, last_disk, last_cpu = now, disk, cpu
                if not root.is_running():
                    break
        finally:
            gpus.close()

    def _tree(self, root: psutil.Process) -> tuple[float, float, Memory, int, int, list[list[float | None]], int]:
        """CPU seconds and storage bytes read since the last call, memory and process count of the tree,
        ``[pid, uss, pss, cpu_s]`` per process (uss and pss None where not read this time), and its
        ``torch_shm_manager`` processes."""
        pids = _descendants(root.pid)
        if pids is not None:
            procs = [root, *(self._procs.get(p) or _process(p) for p in pids)]
            procs = [p for p in procs if p is not None]
        else:
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                procs = [root]
        live = {p.pid for p in procs}
        self._uss_cost = {pid: took for pid, took in self._uss_cost.items() if pid in live}  # the tree's, no more
        cpu_tree = cpu_root = 0.0
        read = count = managers = 0
        memory = Memory()
        mem: list[list[float | None]] = []
        for p in procs:
            p = self._procs.setdefault(p.pid, p)
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    busy = t.user + t.system
                    read_now = self._memory(p.pid)  # budgeted: a page-table walk
                    last = self._last_memory.get(p.pid)
                    if read_now is not None:
                        self._last_memory[p.pid] = last = read_now
                    proc_memory = last or Memory(rss=p.memory_info().rss, exact=False)
                    io = p.io_counters().read_bytes if hasattr(p, "io_counters") else 0
                    managers += p.name() == "torch_shm_manager"
            except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                continue
            delta = busy - self._cpu.get(p.pid, 0.0)
            cpu_tree += delta
            if p.pid == root.pid:
                cpu_root += delta
            read += io - self._io.get(p.pid, 0)
            self._cpu[p.pid], self._io[p.pid] = busy, io
            memory += proc_memory
            mem.append(
                [p.pid, None if read_now is None else read_now.uss, None if read_now is None else read_now.pss, busy]
            )
            count += 1
        return cpu_tree, cpu_root, memory, read, count, mem, managers

    def _memory(self, pid: int) -> Memory | None:
        """``pid``'s memory (``pipeline/memory.py``: PSS, USS, RSS from ``smaps_rollup``, a page-table walk)
        when due, else None: each process is read again only after ``USS_BUDGET`` times the CPU the last reads
        of every process of the tree took, so reading costs at most 1/``USS_BUDGET`` of a core however many
        workers there are, and that wait grows by the sampler's age over ``USS_SLOWDOWN_S``; between
        reads its last figures stand."""
        now = time.perf_counter()
        if now < self._uss_due.get(pid, 0.0):
            return None
        cpu = time.thread_time()
        read = process_memory(pid)
        self._uss_cost[pid] = time.thread_time() - cpu  # its CPU: a loaded machine's waits are nobody's cost
        age = max(0.0, now - self._t0) / USS_SLOWDOWN_S
        self._uss_due[pid] = now + USS_BUDGET * (1.0 + age) * sum(self._uss_cost.values())
        return read


def _shm() -> dict[str, int]:
    """``shm_files`` and ``shm_bytes``: the entries of /dev/shm (none where it is missing or unreadable)."""
    files = size = 0
    try:
        with os.scandir("/dev/shm") as entries:
            for entry in entries:
                files += 1
                try:
                    size += entry.stat(follow_symlinks=False).st_blocks * 512
                except OSError:
                    continue
    except OSError:
        return {}
    return {"shm_files": files, "shm_bytes": size}


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def _descendants(pid: int) -> list[int] | None:
    """Descendants of ``pid`` from /proc/PID/task/TID/children (Linux), or None where that file is missing.

    These files list only the tree's own children (psutil's ``children(recursive=True)`` scans
    every process of the machine; see docs/design-notes.md).
    """
    if not os.path.exists(f"/proc/{pid}/task/{pid}/children"):
        return None
    return descendants(pid)
