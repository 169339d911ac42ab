"""Every contender: how it writes its own format, and how it loads it (as its docs recommend).

A contender is ``prepare(workload, raw, work) -> None`` (write its format under ``work``) and
``load(workload, raw, work) -> (make_iter, count)``: ``make_iter()`` returns one epoch of
batches, ``count(batch)`` the rows in a batch. Imports happen inside, so each contender only
needs its own package in the venv that runs it (see ``ENVS``).
"""

from __future__ import annotations

import functools
import glob
import os
from pathlib import Path
from typing import Any

import numpy as np
from workloads import Workload, token_rows

WORKERS = 2  # the machine's cores


# -- helpers shared by several contenders ---------------------------------------------------------
def pad_ids(rows: list[np.ndarray]) -> np.ndarray:
    out = np.zeros((len(rows), max(len(r) for r in rows)), dtype=np.int32)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def dict_pad_collate(rows):
    """Pad a list of {"ids", "label"} samples (a top-level function: worker processes pickle it)."""
    import torch

    ids = torch.nn.utils.rnn.pad_sequence([torch.as_tensor(r["ids"]) for r in rows], batch_first=True)
    return ids, torch.as_tensor([int(r["label"]) for r in rows])


def torch_pad_collate(samples):
    import torch

    ids = torch.nn.utils.rnn.pad_sequence([torch.as_tensor(s[0]) for s in samples], batch_first=True)
    return ids, torch.as_tensor([int(s[1]) for s in samples])


class MemmapDataset:
    """The seeds' pattern: one row per __getitem__ from .npy memmaps (opened lazily per worker)."""

    def __init__(self, raw: Path, tokens: bool) -> None:
        self.raw, self.tokens = raw, tokens
        self.n = len(np.load(raw / "labels.npy", mmap_mode="r"))
        self._arrays: Any = None

    def __len__(self) -> int:
        return self.n

    def _open(self):
        if self._arrays is None:
            labels = np.load(self.raw / "labels.npy", mmap_mode="r")
            self._arrays = (
                (*token_rows(self.raw), labels) if self.tokens else (np.load(self.raw / "x.npy", mmap_mode="r"), labels)
            )
        return self._arrays

    def __getitem__(self, i: int):
        import torch

        arrays = self._open()
        if self.tokens:
            ids, offsets, labels = arrays
            return torch.from_numpy(np.array(ids[offsets[i] : offsets[i + 1]])), int(labels[i])
        x, labels = arrays
        return torch.from_numpy(np.array(x[i])), int(labels[i])


class BatchedMemmapDataset(MemmapDataset):
    """A tuned torch Dataset: ``__getitems__`` reads a whole batch with one fancy index."""

    def __getitems__(self, indices: list[int]):
        import torch

        idx = np.sort(np.asarray(indices))
        arrays = self._open()
        if self.tokens:
            ids, offsets, labels = arrays
            rows = [ids[offsets[i] : offsets[i + 1]] for i in idx]
            return torch.from_numpy(pad_ids(rows)), torch.from_numpy(labels[idx])
        x, labels = arrays
        out = torch.empty((len(idx), *x.shape[1:]), dtype=torch.from_numpy(x[:0]).dtype)
        if torch.utils.data.get_worker_info() is not None:
            out.share_memory_()  # what torch's own collate does: no copy when the batch crosses processes
        np.take(x, idx, axis=0, out=out.numpy(), mode="clip")
        return out, torch.from_numpy(labels[idx])


def _identity(batch):
    return batch


# -- stoker -----------------------------------------------------------------------------------------
def stoker_prepare(w: Workload, raw: Path, work: Path) -> None:
    import stoker

    labels = np.load(raw / "labels.npy")
    if w.name == "token_ids":
        ids, offsets = token_rows(raw)
        stoker.write(
            work / "store",
            {"ids": stoker.Ragged(np.asarray(ids), offsets), "label": labels},
            {"ids": stoker.Sequence("int32"), "label": stoker.Scalar("int64")},
        )
    else:
        stoker.write(work / "store", {"x": np.load(raw / "x.npy", mmap_mode="r"), "label": labels})


def stoker_load(w: Workload, raw: Path, work: Path):
    import stoker

    loader = stoker.Loader(stoker.open(work / "store"), batch_size=w.batch_size, shuffle=True)
    return (lambda: loader), (lambda b: len(b["label"]))


# -- torch DataLoader ---------------------------------------------------------------------------------
def torch_seed_load(w: Workload, raw: Path, work: Path):
    import torch

    tokens = w.name == "token_ids"
    dl = torch.utils.data.DataLoader(
        MemmapDataset(raw, tokens),
        batch_size=w.batch_size,
        shuffle=True,
        num_workers=WORKERS,
        pin_memory=True,
        collate_fn=torch_pad_collate if tokens else None,
        persistent_workers=True,
    )
    return (lambda: dl), (lambda b: len(b[1]))


def torch_tuned_load(w: Workload, raw: Path, work: Path, loader_cls: Any = None):
    import torch

    cls = loader_cls or torch.utils.data.DataLoader
    dl = cls(
        BatchedMemmapDataset(raw, w.name == "token_ids"),
        batch_size=w.batch_size,
        shuffle=True,
        num_workers=WORKERS,
        collate_fn=_identity,
        persistent_workers=True,
        prefetch_factor=4,
    )
    return (lambda: dl), (lambda b: len(b[1]))


def torchdata_load(w: Workload, raw: Path, work: Path):
    from torchdata.stateful_dataloader import StatefulDataLoader

    return torch_tuned_load(w, raw, work, StatefulDataLoader)


# -- Hugging Face datasets ------------------------------------------------------------------------------
def _hf_rows(raw: Path, tokens: bool, start: int, stop: int):
    labels = np.load(raw / "labels.npy", mmap_mode="r")
    if tokens:
        ids, offsets = token_rows(raw)
        for i in range(start, stop):
            yield {"ids": ids[offsets[i] : offsets[i + 1]], "label": int(labels[i])}
    else:
        x = np.load(raw / "x.npy", mmap_mode="r")
        for i in range(start, stop):
            yield {"x": x[i], "label": int(labels[i])}


def hf_prepare(w: Workload, raw: Path, work: Path) -> None:
    from datasets import Array3D, Dataset, Features, Sequence, Value

    if w.name == "token_ids":
        features = Features({"ids": Sequence(Value("int32")), "label": Value("int64")})
    else:
        x = np.load(raw / "x.npy", mmap_mode="r")
        features = Features({"x": Array3D(x.shape[1:], str(x.dtype)), "label": Value("int64")})
    ds = Dataset.from_generator(
        _hf_rows,
        features=features,
        gen_kwargs={"raw": raw, "tokens": w.name == "token_ids", "start": 0, "stop": w.rows},
    )
    ds.save_to_disk(str(work / "hf"))


def hf_load(w: Workload, raw: Path, work: Path):
    import torch
    from datasets import load_from_disk

    ds = load_from_disk(str(work / "hf")).with_format("torch")
    if w.name == "token_ids":

        def collate(rows):
            return torch.nn.utils.rnn.pad_sequence([r["ids"] for r in rows], batch_first=True), torch.stack(
                [r["label"] for r in rows]
            )

        dl = torch.utils.data.DataLoader(
            ds, batch_size=w.batch_size, shuffle=True, num_workers=WORKERS, collate_fn=collate, persistent_workers=True
        )
        return (lambda: dl), (lambda b: len(b[1]))
    dl = torch.utils.data.DataLoader(
        ds, batch_size=w.batch_size, shuffle=True, num_workers=WORKERS, persistent_workers=True
    )
    return (lambda: dl), (lambda b: len(b["label"]))


# -- WebDataset -------------------------------------------------------------------------------------------
def wds_prepare(w: Workload, raw: Path, work: Path) -> None:
    import webdataset as wds

    (work / "wds").mkdir(parents=True, exist_ok=True)
    key = "ids.npy" if w.name == "token_ids" else "x.npy"
    with wds.ShardWriter(str(work / "wds" / "shard-%06d.tar"), maxsize=128 * 2**20, verbose=0) as sink:
        for i, row in enumerate(_hf_rows(raw, w.name == "token_ids", 0, w.rows)):
            value = row["ids"] if "ids" in row else row["x"]
            sink.write({"__key__": f"{i:09d}", key: np.asarray(value), "cls": row["label"]})


def _wds_pad(samples):
    import torch

    ids, labels = zip(*samples)
    return torch.from_numpy(pad_ids(list(ids))), torch.as_tensor(labels)


def wds_load(w: Workload, raw: Path, work: Path):
    import webdataset as wds

    urls = sorted(glob.glob(str(work / "wds" / "shard-*.tar")))
    key = "ids.npy" if w.name == "token_ids" else "x.npy"
    pipeline = (
        wds.WebDataset(urls, shardshuffle=len(urls), empty_check=False).shuffle(1000).decode().to_tuple(key, "cls")
    )
    if w.name == "token_ids":
        pipeline = pipeline.batched(w.batch_size, collation_fn=_wds_pad, partial=False)
    else:
        pipeline = pipeline.batched(w.batch_size, partial=False)
    loader = wds.WebLoader(pipeline, batch_size=None, num_workers=WORKERS, persistent_workers=True)
    return (lambda: loader), (lambda b: len(b[1]))


# -- LitData ----------------------------------------------------------------------------------------------
def _lit_row(i: int, raw: str, tokens: bool) -> dict:
    return next(_hf_rows(Path(raw), tokens, i, i + 1))


def litdata_prepare(w: Workload, raw: Path, work: Path) -> None:
    import litdata as ld

    ld.optimize(
        fn=functools.partial(_lit_row, raw=str(raw), tokens=w.name == "token_ids"),
        inputs=list(range(w.rows)),
        output_dir=str(work / "litdata"),
        chunk_bytes="64MB",
        num_workers=WORKERS,
    )


def litdata_load(w: Workload, raw: Path, work: Path):
    import litdata as ld

    ds = ld.StreamingDataset(str(work / "litdata"), shuffle=True)
    if w.name == "token_ids":
        dl = ld.StreamingDataLoader(ds, batch_size=w.batch_size, num_workers=WORKERS, collate_fn=dict_pad_collate)
        return (lambda: dl), (lambda b: len(b[1]))
    dl = ld.StreamingDataLoader(ds, batch_size=w.batch_size, num_workers=WORKERS)
    return (lambda: dl), (lambda b: len(b["label"]))


# -- SPDL -------------------------------------------------------------------------------------------------
def spdl_load(w: Workload, raw: Path, work: Path):
    from spdl.pipeline import PipelineBuilder

    ds = BatchedMemmapDataset(raw, w.name == "token_ids")

    def batches():
        order = np.random.default_rng().permutation(len(ds))
        for b in range(len(ds) // w.batch_size):
            yield order[b * w.batch_size : (b + 1) * w.batch_size]

    def epoch():
        pipeline = (
            PipelineBuilder()
            .add_source(batches())
            .pipe(ds.__getitems__, concurrency=WORKERS)
            .add_sink(4)
            .build(num_threads=WORKERS)
        )
        with pipeline.auto_stop():
            yield from pipeline

    return epoch, (lambda b: len(b[1]))


# -- NVIDIA DALI (CPU pipeline) -------------------------------------------------------------------------------
def dali_prepare(w: Workload, raw: Path, work: Path) -> None:
    out = work / "dali"
    out.mkdir(parents=True, exist_ok=True)
    labels = np.load(raw / "labels.npy", mmap_mode="r")
    for i, row in enumerate(_hf_rows(raw, w.name == "token_ids", 0, w.rows)):
        np.save(out / f"{i:09d}.x.npy", np.asarray(row["ids"] if "ids" in row else row["x"]))
        np.save(out / f"{i:09d}.y.npy", np.asarray([labels[i]], dtype=np.int64))


def dali_load(w: Workload, raw: Path, work: Path):
    from nvidia.dali import fn, pipeline_def
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    root = str(work / "dali")
    xs = sorted(f for f in os.listdir(root) if f.endswith(".x.npy"))
    ys = [f.replace(".x.npy", ".y.npy") for f in xs]

    @pipeline_def(batch_size=w.batch_size, num_threads=WORKERS, device_id=None, prefetch_queue_depth=2)
    def pipe():
        x = fn.readers.numpy(file_root=root, files=xs, random_shuffle=True, seed=7, name="reader")
        y = fn.readers.numpy(file_root=root, files=ys, random_shuffle=True, seed=7)
        if w.name == "token_ids":
            x = fn.pad(x, fill_value=0)
        return x, y

    p = pipe()
    p.build()
    it = DALIGenericIterator(
        p, ["x", "label"], reader_name="reader", last_batch_policy=LastBatchPolicy.DROP, auto_reset=True
    )
    return (lambda: it), (lambda b: len(b[0]["label"]))


# -- MosaicML Streaming (own venv) ---------------------------------------------------------------------------
def mosaic_prepare(w: Workload, raw: Path, work: Path) -> None:
    from streaming import MDSWriter

    if w.name == "token_ids":
        columns = {"ids": "ndarray:int32", "label": "int64"}
    else:
        x = np.load(raw / "x.npy", mmap_mode="r")
        columns = {"x": f"ndarray:{x.dtype}:{','.join(map(str, x.shape[1:]))}", "label": "int64"}
    with MDSWriter(out=str(work / "mds"), columns=columns, size_limit="64mb") as out:
        for row in _hf_rows(raw, w.name == "token_ids", 0, w.rows):
            out.write(row)


def mosaic_load(w: Workload, raw: Path, work: Path):
    import torch
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()  # as Mosaic's docs advise after a run that did not exit cleanly
    ds = StreamingDataset(local=str(work / "mds"), shuffle=True, batch_size=w.batch_size)
    collate = None
    if w.name == "token_ids":

        def collate(rows):
            return torch.nn.utils.rnn.pad_sequence(
                [torch.as_tensor(r["ids"]) for r in rows], batch_first=True
            ), torch.as_tensor([r["label"] for r in rows])

    dl = torch.utils.data.DataLoader(
        ds, batch_size=w.batch_size, num_workers=WORKERS, collate_fn=collate, persistent_workers=True
    )
    if collate is None:
        return (lambda: dl), (lambda b: len(b["label"]))
    return (lambda: dl), (lambda b: len(b[1]))


# -- FFCV (own venv; built against Debian's libturbojpeg and OpenCV) ------------------------------------------------
class _IndexedRows:
    def __init__(self, raw: Path) -> None:
        self.x = np.load(raw / "x.npy", mmap_mode="r")
        self.labels = np.load(raw / "labels.npy", mmap_mode="r")

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return np.asarray(self.x[i]), int(self.labels[i])


def ffcv_prepare(w: Workload, raw: Path, work: Path) -> None:
    if w.name == "token_ids":
        raise NotImplementedError(
            "FFCV has no field for variable-length numeric arrays (NDArrayField needs a fixed shape)"
        )
    from ffcv.fields import IntField, NDArrayField
    from ffcv.writer import DatasetWriter

    rows = _IndexedRows(raw)
    fields = {"x": NDArrayField(shape=rows.x.shape[1:], dtype=rows.x.dtype), "label": IntField()}
    DatasetWriter(str(work / "data.beton"), fields, num_workers=WORKERS).from_indexed_dataset(rows)


def ffcv_load(w: Workload, raw: Path, work: Path):
    from ffcv.fields.decoders import IntDecoder, NDArrayDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import ToTensor

    loader = Loader(
        str(work / "data.beton"),
        batch_size=w.batch_size,
        num_workers=WORKERS,
        order=OrderOption.RANDOM,
        drop_last=True,
        os_cache=True,
        pipelines={"x": [NDArrayDecoder(), ToTensor()], "label": [IntDecoder(), ToTensor()]},
    )
    return (lambda: loader), (lambda b: len(b[1]))


def _nothing(w: Workload, raw: Path, work: Path) -> None:
    return None


# name -> (environment, prepare, load)
CONTENDERS: dict[str, tuple[str, Any, Any]] = {
    "stoker": ("peers", stoker_prepare, stoker_load),
    "torch DataLoader (seed pattern)": ("peers", _nothing, torch_seed_load),
    "torch DataLoader (tuned: __getitems__)": ("peers", _nothing, torch_tuned_load),
    "torchdata StatefulDataLoader": ("peers", _nothing, torchdata_load),
    "HF datasets": ("peers", hf_prepare, hf_load),
    "WebDataset": ("peers", wds_prepare, wds_load),
    "LitData": ("peers", litdata_prepare, litdata_load),
    "SPDL": ("peers", _nothing, spdl_load),
    "NVIDIA DALI (CPU)": ("peers", dali_prepare, dali_load),
    "MosaicML Streaming": ("mosaic", mosaic_prepare, mosaic_load),
    "FFCV": ("ffcv", ffcv_prepare, ffcv_load),
}
