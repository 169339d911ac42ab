"""The verdict and the ranked recommendations, each with its evidence and the stoker call that applies it.

Each rule looks at one loader's numbers and the resources, and returns at most one
``Recommendation`` with ``gain_s``, a rough estimate of the seconds of this run it could save;
recommendations are ranked by that estimate.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from stoker.doctor.analysis import LoaderStats


@dataclass
class Recommendation:
    title: str
    evidence: str
    action: str
    gain_s: float
    loader: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def _call(st: LoaderStats, **opts: Any) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in opts.items())
    if st.info.kind == "stoker":
        return f"stoker.Loader(..., {args})"
    return f"torch.utils.data.DataLoader({st.info.source or 'dataset'}(...), ..., {args})"


def _batch_size(st: LoaderStats, default: int) -> int:
    return st.info.batch_size if st.info.batch_size is not None else default


def verdict(stall: float, threshold: float, loaders: dict[str, LoaderStats]) -> str:
    if not any(st.steps for st in loaders.values()):
        return "no data loader seen"
    return "input-bound" if stall >= threshold else "compute-bound"


def bottleneck_stage(st: LoaderStats) -> dict[str, Any] | None:
    rows = st.stage_table()
    if rows:
        return rows[0]
    if st.info.kind == "torch":
        untimed = "(not timed: workers were not forked from the script)"
        return {"stage": f"{st.info.source or 'Dataset'}.__getitem__ {untimed}", "total_s": None}
    return None


def bottleneck_resource(bound: str, res: dict[str, Any], gpu_status: str) -> str:
    cores = res.get("cores", 1)
    if bound == "no data loader seen" or not res.get("samples"):
        return "unknown (no samples)" if not res.get("samples") else "n/a"
    busy_tree, busy_machine = res["cpu_tree_cores"], res["cpu_machine_pct"]
    if bound == "input-bound":
        if res.get("iowait_pct", 0) >= 20:
            return f"disk (CPU waits on I/O {res['iowait_pct']:.0f} % of the time; {res['disk_iops']:.0f} reads/s)"
        if busy_tree >= 0.8 * cores:
            return f"CPU ({busy_tree:.1f} of {cores} cores busy in the script's processes, {busy_machine:.0f} % machine-wide)"
        if busy_machine >= 90:
            return f"CPU shared with other processes (the machine is {busy_machine:.0f} % busy, the script uses {busy_tree:.1f} of {cores} cores)"
        return f"loader parallelism (only {busy_tree:.1f} of {cores} cores busy: the data pipeline leaves cores idle)"
    if "gpu_util_pct" in res:
        return f"GPU compute ({res['gpu_util_pct']:.0f} % utilization)"
    return f"the step's compute on the CPU ({gpu_status}; {busy_tree:.1f} of {cores} cores busy)"


def recommend(
    loaders: dict[str, LoaderStats], res: dict[str, Any], bound: str, stall: float, gpu_status: str
) -> list[Recommendation]:
    recs: list[Recommendation] = []
    cores = res.get("cores", 1)
    has_gpu = "gpu_util_pct" in res
    for st in loaders.values():
        if not st.steps:
            continue
        recs.extend(r for r in _rules(st, res, bound, cores, has_gpu) if r is not None)
    return sorted(recs, key=lambda r: -r.gain_s)


def _rules(st: LoaderStats, res: dict[str, Any], bound: str, cores: int, has_gpu: bool) -> list[Recommendation | None]:
    return [
        _more_workers(st, res, bound, cores),
        _precompute(st, bound),
        _store_for_reads(st, res, bound),
        _pin(st, has_gpu),
        _normalize_on_device(st, has_gpu) if has_gpu else None,
        _bucketing(st),
        _larger_batch(st, res, bound),
    ]


def _more_workers(st: LoaderStats, res: dict[str, Any], bound: str, cores: int) -> Recommendation | None:
    workers = st.info.num_workers or 0
    busy = res.get("cpu_tree_cores")
    if bound != "input-bound" or busy is None or workers >= cores:
        return None
    machine = res.get("cpu_machine_pct", 0.0) / 100 * cores  # other processes' load counts: their cores are not free
    idle = cores - max(busy, machine)
    if idle < 0.25 * cores:
        return None
    target = min(cores, max(2, 2 * workers))
    return Recommendation(
        f"More loader workers ({workers} -> {target})",
        f"the loop waits on data {_pct(st.wait_s / max(st.wait_s + st.compute_s, 1e-9))} of its time while "
        f"{idle:.1f} of {cores} cores are idle (the script uses {busy:.1f}); num_workers={workers}",
        _call(st, num_workers=target),
        st.wait_s * (1 - max(workers, 1) / target) if target > max(workers, 1) else 0.25 * st.wait_s,
        st.name,
    )


def _precompute(st: LoaderStats, bound: str) -> Recommendation | None:
    if bound != "input-bound" or st.info.store:
        return None
    rows = st.stage_table()
    heavy = next((r for r in rows if "__getitem__" in r["stage"] or r.get("key") == "read"), None)
    if heavy is None:
        return None
    per = heavy["ms_per_call"]
    return Recommendation(
        "Precompute the per-sample work into a store",
        f"{heavy['stage']} takes {per:.1f} ms per batch and the loop waits on data {st.wait_s:.2f} s; "
        "a store is read with one gather per batch",
        'once: stoker.write("stores/train", {"x": xs, "y": ys})  (or: stoker convert text|images ...); '
        f'then: stoker.Loader("stores/train", batch_size={_batch_size(st, 64)}, shuffle=True)',
        0.8 * st.wait_s,
        st.name,
    )


def _store_for_reads(st: LoaderStats, res: dict[str, Any], bound: str) -> Recommendation | None:
    rows = {r.get("key"): r for r in st.stage_table()}
    iowait = res.get("iowait_pct", 0.0)
    reads_dominate = rows and "read" in rows and rows["read"] is max(rows.values(), key=lambda r: r["total_s"])
    if bound != "input-bound" or not (iowait >= 20 or (reads_dominate and st.info.store)):
        return None
    return Recommendation(
        "Reads dominate: a store on a faster disk",
        f"CPU waits on I/O {iowait:.0f} % of the time; storage reads {res.get('disk_read_bps', 0) / 1e6:.0f} MB/s "
        f"at {res.get('disk_iops', 0):.0f} reads/s",
        'stoker.write("/local-ssd/stores/train", ...) then stoker.Loader("/local-ssd/stores/train", ...); '
        "stoker inspect STORE shows its size",
        0.5 * st.wait_s,
        st.name,
    )


def _pin(st: LoaderStats, has_gpu: bool) -> Recommendation | None:
    if not has_gpu or st.info.pin_memory:
        return None
    h2d = sum(st.stages.get("h2d_wait", [])) + sum(st.stages.get("transfer", []))
    if st.info.kind == "stoker":
        call = 'stoker.Loader(..., device="cuda")  (pins by default)'
    else:
        call = _call(st, pin_memory=True)
    return Recommendation(
        "Pinned memory for host-to-device copies",
        f"pin_memory is off for {st.name}; transfers took {h2d:.2f} s",
        call,
        0.5 * h2d + 0.05 * st.wait_s,
        st.name,
    )


def _normalize_on_device(st: LoaderStats, has_gpu: bool) -> Recommendation | None:
    for b in st.batches[:1]:
        for t in b.tensors:
            if t.dtype in ("float32", "float64") and len(t.shape) == 4 and t.device == "cpu":
                return Recommendation(
                    "Move images as uint8 and normalize on the device",
                    f"batch field {t.path} arrives as {t.dtype}{list(t.shape)} on the CPU: 4x the bytes of uint8, "
                    "and the float conversion runs per sample",
                    'stoker.write("stores/images", {"image": uint8_images, ...}); then, on each batch: '
                    'x = batch["image"].to("cuda", non_blocking=True).float().div_(255)',
                    0.3 * st.wait_s if has_gpu else 0.1 * st.wait_s,
                    st.name,
                )
    return None


def _bucketing(st: LoaderStats) -> Recommendation | None:
    pads = [b.padding for b in st.batches if b.padding is not None]
    if not pads or sum(pads) / len(pads) < 0.3:
        return None
    share = sum(pads) / len(pads)
    return Recommendation(
        "Group similar lengths (bucketing)",
        f"{_pct(share)} of the token positions in the inspected batches are padding",
        f"stoker.text.Loader(texts, tokenizer=..., batch_size={_batch_size(st, 32)}, bucketing=True)"
        "  (or max_tokens=... for a token budget)",
        share * st.compute_s * 0.5,
        st.name,
    )


def _larger_batch(st: LoaderStats, res: dict[str, Any], bound: str) -> Recommendation | None:
    util = res.get("gpu_util_pct")
    bs = st.info.batch_size
    if util is None or util >= 60 or bound != "compute-bound" or not isinstance(bs, int):
        return None
    return Recommendation(
        "A larger batch: the GPU is underused",
        f"GPU utilization averages {util:.0f} % while the loop is compute-bound",
        _call(st, batch_size=2 * bs),
        0.2 * st.compute_s,
        st.name,
    )
