"""The verdict and the ranked recommendations, each with its evidence and the stoker call that applies it.

Each rule looks at one loader's numbers and the resources, and returns at most one
``Recommendation`` with ``gain_s``, a rough estimate of the seconds of this run it could save;
recommendations are ranked by that estimate. Each names its loader (``loader``, the loader's
label in the report) and uses its real batch size (the setting, else the inspected batches').

A Dataset whose ``__getitem__`` draws at random (two calls for one index differ, or a random
transform is among its attributes) is never told to store its outputs, which would freeze the
augmentation: it is told to store the images encoded and augment at load time. The commands
are the ones that fit what the doctor knows of the Dataset: ``stoker convert images ROOT ...``
for a Dataset reading a folder of images, ``stoker convert dataset module:attribute ...`` for
one the command can import. The suggested code keeps what the Dataset's transforms do: they are
written as stoker.vision ops of the same names and arguments (``transform_facts.py``; a squash
``Resize((h, w))`` stays one, no flip is added); where they cannot be read, the advice says in words
what its code does (shorter-side resize and center crop; RandomResizedCrop and a flip) and how to change it.
"""

from __future__ import annotations

import os
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
    bound = f"{st.info.variable} = " if st.info.variable else ""
    if st.info.kind == "stoker":
        return f"{bound}stoker.Loader(..., {args})"
    return f"{bound}torch.utils.data.DataLoader({st.info.source or 'dataset'}(...), ..., {args})"


def _batch_arg(st: LoaderStats) -> str:
    """``batch_size=N, `` with the loader's real batch size, or nothing when it is not known."""
    return f"batch_size={st.batch_size}, " if st.batch_size is not None else ""


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
        _precompute(st, bound, has_gpu),
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


def _image_size(st: LoaderStats) -> int:
    """The side of the inspected image batches (N, C, H, W or N, H, W, C), else 224."""
    for b in st.batches:
        for t in b.tensors:
            if len(t.shape) == 4:
                return t.shape[2] if t.shape[1] in (1, 3, 4) else t.shape[1]
    return 224


def _randomness(st: LoaderStats) -> str:
    """Why the Dataset is known to draw at random, or ``""``."""
    why = []
    if st.info.random_transforms:
        why.append(f"it holds {', '.join(st.info.random_transforms)}")
    if st.random:
        why.append("two calls of __getitem__ for one index returned different samples")
    return " and ".join(why)


def _store_name(st: LoaderStats) -> str:
    base = os.path.basename(st.info.image_root.rstrip("/")) if st.info.image_root else ""
    base = base or (st.info.source.rsplit(".", 1)[-1].lower() if st.info.source else "train")
    return f"stores/{base}"


def _precompute(st: LoaderStats, bound: str, has_gpu: bool = False) -> Recommendation | None:
    if bound != "input-bound" or st.info.store:
        return None
    rows = st.stage_table()
    heavy = next((r for r in rows if "__getitem__" in r["stage"] or r.get("key") == "read"), None)
    if heavy is None:
        return None
    info, store, batch = st.info, _store_name(st), _batch_arg(st)
    cost = (
        f"{heavy['stage']} takes {heavy['ms_per_call']:.1f} ms per {heavy.get('unit', 'call')} "
        f"({heavy['calls']} calls) and the loop waits on data {st.wait_s:.2f} s"
    )
    random = _randomness(st)
    if random:
        return _augment_at_load(st, cost, random, store, batch + ('device="cuda", ' if has_gpu else ""))
    checked = "" if st.random is not None else " (not checked for random augmentation)"
    if info.image_root:
        size = _image_size(st)
        resized = f"stoker.vision.Compose([stoker.vision.Resize({size}), stoker.vision.CenterCrop({size})])"
        if info.transforms and info.transforms != resized:  # a resized store would crop otherwise: keep theirs
            return _encoded_images(st, f"{cost}; __getitem__ gave the same sample twice{checked}", store, batch)
        same = (
            f" (your Dataset's Resize({size}) + CenterCrop({size}))"
            if info.transforms
            else (
                f" (the store's images are the shorter side resized to {size}, then center-cropped; no torchvision "
                "transform was found on the Dataset, so whether __getitem__ does the same is not known: a squash "
                f"to {size}x{size} or another crop gives other pixels; stoker convert dataset "
                f"{info.dataset_ref or 'MODULE:ATTRIBUTE'} {store} stores exactly what __getitem__ returns)"
            )
        )
        return Recommendation(
            "Precompute the decoded, resized images into a store",
            f"{cost}; __getitem__ gave the same sample twice{checked}; a store of uint8 images is read with "
            "one gather per batch",
            f"once: stoker convert images {info.image_root} {store} --mode resized --size {size}{same}; "
            f'then: stoker.Loader("{store}", {batch}shuffle=True) and, on the device, '
            'x = batch["image"].float().div_(255) (then your Normalize)',
            0.8 * st.wait_s,
            st.name,
        )
    note = f" ({info.dataset_note})" if info.dataset_note else ""
    convert = f"stoker convert dataset {info.dataset_ref or 'MODULE:ATTRIBUTE'} {store}{note}"
    return Recommendation(
        "Precompute the per-sample work into a store",
        f"{cost}{checked}; a store is read with one gather per batch",
        f'once: {convert}; then: stoker.Loader("{store}", {batch}shuffle=True)',
        0.8 * st.wait_s,
        st.name,
    )


def _augment_at_load(st: LoaderStats, cost: str, random: str, store: str, batch: str) -> Recommendation:
    """The advice for a Dataset that draws at random: keep the augmentation out of the store.

    ``batch`` holds the loader's keywords (batch size, and the device where there is a GPU).
    """
    info = st.info
    evidence = f"{cost}; __getitem__ draws at random ({random}): a store of its outputs would freeze the augmentation"
    if info.image_root:
        return _encoded_images(st, evidence, store, batch)
    note = f" ({info.dataset_note})" if info.dataset_note else ""
    ref = info.dataset_ref or "MODULE:ATTRIBUTE"
    return Recommendation(
        "Store the samples before their random part; augment each batch on the device",
        evidence,
        f"take the random transforms out of __getitem__, then once: stoker convert dataset {ref} {store}{note}; "
        f'then: for batch in stoker.Loader("{store}", {batch}shuffle=True): '
        "apply the augmentation to the whole batch (on the GPU where there is one)",
        0.6 * st.wait_s,
        st.name,
    )


def _encoded_images(st: LoaderStats, evidence: str, store: str, batch: str) -> Recommendation:
    """Store the images encoded and run the Dataset's own transforms, as stoker.vision ops, at load time;
    where they are not known (a random Dataset's), ``train_transforms`` and in words what it draws."""
    info, size = st.info, _image_size(st)
    if info.transforms:
        code, kept = info.transforms, " (your Dataset's transforms, as stoker.vision ops"
        kept += (
            f"; left out: {info.transforms_left}: add stoker.vision's batch op of that name or your callable after "
            "the crop ops)"
            if info.transforms_left
            else ")"
        )
    else:
        code = f"stoker.vision.train_transforms({size})"
        kept = (
            f" (train_transforms({size}) is RandomResizedCrop({size}): a random area and aspect ratio rescaled to "
            f"{size}, then RandomHorizontalFlip(); the Dataset's own transforms could not be read as torchvision ops"
            f"{' (' + info.transforms_left + ')' if info.transforms_left else ''}: if they crop at a random place "
            f"without rescaling or never flip, use stoker.vision.Compose([stoker.vision.RandomCrop({size})]) or the "
            "ops they do use instead)"
        )
    return Recommendation(
        "Store the images encoded; run the transforms at load time",
        evidence,
        f"once: stoker convert images {info.image_root} {store}  (JPEG bytes, decoded per batch); "
        f"then: stoker.Loader(stoker.vision.ImageSource({store!r}, {code}), {batch}shuffle=True){kept}",
        0.6 * st.wait_s,
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
        f"stoker.text.Loader(texts, tokenizer=..., {_batch_arg(st)}bucketing=True)"
        "  (or max_tokens=... for a token budget)",
        share * st.compute_s * 0.5,
        st.name,
    )


def _larger_batch(st: LoaderStats, res: dict[str, Any], bound: str) -> Recommendation | None:
    util = res.get("gpu_util_pct")
    bs = st.batch_size
    if util is None or util >= 60 or bound != "compute-bound" or not isinstance(bs, int):
        return None
    return Recommendation(
        "A larger batch: the GPU is underused",
        f"GPU utilization averages {util:.0f} % while the loop is compute-bound",
        _call(st, batch_size=2 * bs),
        0.2 * st.compute_s,
        st.name,
    )
