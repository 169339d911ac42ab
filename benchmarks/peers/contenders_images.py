"""The images_jpeg workload: real JPEG photos -> RandomResizedCrop(224) + horizontal flip, uint8.

Every contender crops with torchvision's RandomResizedCrop parameters (scale 0.08-1, ratio 3/4-4/3,
bilinear) and flips half the images, and hands out uint8 batches (Normalize is left to the GPU
for all alike). Peers without a decoder of their own decode with Pillow and crop with the box
form of ``Image.resize`` (what torchvision's ``resized_crop`` does on a PIL image, in one call);
torchvision itself does not import beside this torch. FFCV and DALI use their own JPEG decoders
and crop operators (their documented ImageNet training pipelines); SPDL uses its FFmpeg image
decode with a crop/scale/flip filter graph.
"""

from __future__ import annotations

import glob
import io
import math
import random
from pathlib import Path

import numpy as np
from contenders import WORKERS, _identity, _nothing
from workloads import IMAGE_SIZE, Workload, image_files

S = IMAGE_SIZE


def crop_box(
    width: int, height: int, rng: random.Random, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)
) -> tuple[int, int, int, int]:
    """torchvision's RandomResizedCrop.get_params: (left, top, width, height)."""
    area = width * height
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(*log_ratio))
        w, h = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, width - w), rng.randint(0, height - h), w, h
    in_ratio = width / height
    w, h = (
        (width, int(round(width / ratio[0])))
        if in_ratio < ratio[0]
        else (int(round(height * ratio[1])), height)
        if in_ratio > ratio[1]
        else (width, height)
    )
    return (width - w) // 2, (height - h) // 2, w, h


def pil_train(im, rng: random.Random = random._inst) -> np.ndarray:  # type: ignore[attr-defined]
    """A PIL image -> cropped, resized, maybe flipped uint8 HWC array."""
    from PIL import Image

    im = im.convert("RGB")
    x, y, w, h = crop_box(im.width, im.height, rng)
    out = im.resize((S, S), Image.BILINEAR, box=(x, y, x + w, y + h))
    if rng.random() < 0.5:
        out = out.transpose(Image.FLIP_LEFT_RIGHT)
    return np.asarray(out)


def pil_train_bytes(data: bytes) -> np.ndarray:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return pil_train(im)


def stack(arrays, labels):
    """uint8 HWC arrays -> an NCHW uint8 batch (a channels-last view, as FFCV's ToTorchImage gives)."""
    import torch

    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2), torch.as_tensor(np.asarray(labels, dtype=np.int64))


def collate_pairs(samples):
    return stack([s[0] for s in samples], [s[1] for s in samples])


def _count(batch) -> int:
    return len(batch[1])


# -- stoker -------------------------------------------------------------------------------------------
def stoker_prepare(w: Workload, raw: Path, work: Path) -> None:
    import stoker.convert
    from stoker import vision  # noqa: F401

    paths, labels = image_files(raw)
    stoker.convert.images(paths, work / "store", labels=labels.tolist())


def stoker_load(w: Workload, raw: Path, work: Path):
    import stoker
    from stoker import vision

    source = vision.ImageSource(work / "store", vision.train_transforms(S, normalize=False))
    loader = stoker.Loader(source, batch_size=w.batch_size, shuffle=True)
    return (lambda: loader), (lambda b: len(b["label"]))


# -- torch DataLoader / torchdata over the files --------------------------------------------------------
class Files:
    """ImageFolder-style: one file per __getitem__, Pillow decode, the crop and flip."""

    def __init__(self, raw: Path) -> None:
        self.paths, self.labels = image_files(raw)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int):
        import torch
        from PIL import Image

        with Image.open(self.paths[i]) as im:
            return torch.from_numpy(pil_train(im)).permute(2, 0, 1), int(self.labels[i])


class BatchedFiles(Files):
    """Tuned: ``__getitems__`` writes the batch into one shared-memory uint8 tensor (no collate copy)."""

    def __getitems__(self, indices: list[int]):
        import torch
        from PIL import Image

        out = torch.empty((len(indices), S, S, 3), dtype=torch.uint8)
        if torch.utils.data.get_worker_info() is not None:
            out.share_memory_()
        for row, i in enumerate(indices):
            with Image.open(self.paths[i]) as im:
                out[row] = torch.from_numpy(pil_train(im))
        return out.permute(0, 3, 1, 2), torch.as_tensor(self.labels[indices])


def torch_seed_load(w: Workload, raw: Path, work: Path):
    import torch

    dl = torch.utils.data.DataLoader(
        Files(raw), batch_size=w.batch_size, shuffle=True, num_workers=WORKERS, pin_memory=True, persistent_workers=True
    )
    return (lambda: dl), _count


def torch_tuned_load(w: Workload, raw: Path, work: Path, loader_cls=None):
    import torch

    cls = loader_cls or torch.utils.data.DataLoader
    dl = cls(
        BatchedFiles(raw),
        batch_size=w.batch_size,
        shuffle=True,
        num_workers=WORKERS,
        collate_fn=_identity,
        persistent_workers=True,
        prefetch_factor=4,
    )
    return (lambda: dl), _count


def torchdata_load(w: Workload, raw: Path, work: Path):
    from torchdata.stateful_dataloader import StatefulDataLoader

    return torch_tuned_load(w, raw, work, StatefulDataLoader)


# -- Hugging Face datasets: an Image column, set_transform for the augmentation (its docs' recipe) --------
def _hf_rows(paths: list[str], labels: list[int]):
    for p, label in zip(paths, labels):
        yield {"image": {"bytes": Path(p).read_bytes(), "path": None}, "label": label}


def hf_prepare(w: Workload, raw: Path, work: Path) -> None:
    from datasets import Dataset, Features, Image, Value

    paths, labels = image_files(raw)
    features = Features({"image": Image(), "label": Value("int64")})
    ds = Dataset.from_generator(_hf_rows, features=features, gen_kwargs={"paths": paths, "labels": labels.tolist()})
    ds.save_to_disk(str(work / "hf"))


def _hf_transform(batch):
    return {"pixels": [pil_train(im) for im in batch["image"]], "label": batch["label"]}


def _hf_collate(rows):
    return stack([r["pixels"] for r in rows], [r["label"] for r in rows])


def hf_load(w: Workload, raw: Path, work: Path):
    import torch
    from datasets import load_from_disk

    ds = load_from_disk(str(work / "hf"))
    ds.set_transform(_hf_transform)
    dl = torch.utils.data.DataLoader(
        ds, batch_size=w.batch_size, shuffle=True, num_workers=WORKERS, collate_fn=_hf_collate, persistent_workers=True
    )
    return (lambda: dl), _count


# -- WebDataset ------------------------------------------------------------------------------------------
def wds_prepare(w: Workload, raw: Path, work: Path) -> None:
    import webdataset as wds

    (work / "wds").mkdir(parents=True, exist_ok=True)
    paths, labels = image_files(raw)
    with wds.ShardWriter(str(work / "wds" / "shard-%06d.tar"), maxsize=64 * 2**20, verbose=0) as sink:
        for i, (p, label) in enumerate(zip(paths, labels)):
            sink.write({"__key__": f"{i:09d}", "jpg": Path(p).read_bytes(), "cls": int(label)})


def wds_load(w: Workload, raw: Path, work: Path):
    import webdataset as wds

    urls = sorted(glob.glob(str(work / "wds" / "shard-*.tar")))
    pipeline = (
        wds.WebDataset(urls, shardshuffle=len(urls), empty_check=False)
        .shuffle(1000)
        .decode("pil")
        .to_tuple("jpg", "cls")
        .map_tuple(pil_train, int)
        .batched(w.batch_size, collation_fn=collate_pairs, partial=False)
    )
    loader = wds.WebLoader(pipeline, batch_size=None, num_workers=WORKERS, persistent_workers=True)
    return (lambda: loader), _count


# -- LitData: its JPEG deserializer needs torchvision (absent here), so bytes + Pillow ---------------------
def _lit_image_row(i: int, raw: str) -> dict:
    paths, labels = _lit_image_row.cache.get(raw) or _lit_image_row.cache.setdefault(raw, image_files(Path(raw)))
    return {"jpg": Path(paths[i]).read_bytes(), "label": int(labels[i])}


_lit_image_row.cache = {}  # type: ignore[attr-defined]


def litdata_prepare(w: Workload, raw: Path, work: Path) -> None:
    import functools

    import litdata as ld

    n = len(np.load(raw / "labels.npy", mmap_mode="r"))
    ld.optimize(
        fn=functools.partial(_lit_image_row, raw=str(raw)),
        inputs=list(range(n)),
        output_dir=str(work / "litdata"),
        chunk_bytes="64MB",
        num_workers=WORKERS,
    )


def _lit_collate(rows):
    return stack([pil_train_bytes(r["jpg"]) for r in rows], [r["label"] for r in rows])


def litdata_load(w: Workload, raw: Path, work: Path):
    import litdata as ld

    ds = ld.StreamingDataset(str(work / "litdata"), shuffle=True)
    dl = ld.StreamingDataLoader(ds, batch_size=w.batch_size, num_workers=WORKERS, collate_fn=_lit_collate)
    return (lambda: dl), _count


# -- SPDL: its FFmpeg image decode, crop/scale/flip in the filter graph, thread pipeline --------------------
def spdl_load(w: Workload, raw: Path, work: Path):
    import spdl.io
    from spdl.pipeline import PipelineBuilder

    paths, labels = image_files(raw)

    def load(i: int):
        packets = spdl.io.demux_image(paths[i])  # header: the crop box needs the size
        x, y, cw, ch = crop_box(packets.width, packets.height, random._inst)  # type: ignore[attr-defined]
        flip = ",hflip" if random.random() < 0.5 else ""
        desc = f"crop={cw}:{ch}:{x}:{y},scale={S}:{S}:flags=bilinear{flip},format=rgb24"
        return spdl.io.decode_packets(packets, filter_desc=desc), int(labels[i])

    def batch(samples):
        import torch

        frames = spdl.io.convert_frames([s[0] for s in samples])  # one copy into the batch buffer
        return torch.from_numpy(spdl.io.to_numpy(frames)).permute(0, 3, 1, 2), torch.as_tensor([s[1] for s in samples])

    def epoch():
        order = np.random.default_rng().permutation(len(paths))
        pipeline = (
            PipelineBuilder()
            .add_source(iter(order.tolist()))
            .pipe(load, concurrency=WORKERS)
            .aggregate(w.batch_size, drop_last=True)
            .pipe(batch)
            .add_sink(4)
            .build(num_threads=WORKERS)
        )
        with pipeline.auto_stop():
            yield from pipeline

    return epoch, _count


# -- NVIDIA DALI (CPU): its ImageNet training recipe, on the CPU ---------------------------------------------
def dali_load(w: Workload, raw: Path, work: Path):
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    paths, labels = image_files(raw)

    @pipeline_def(batch_size=w.batch_size, num_threads=WORKERS, device_id=None, prefetch_queue_depth=2)
    def pipe():
        jpegs, label = fn.readers.file(
            files=paths, labels=labels.astype(np.int32).tolist(), random_shuffle=True, name="reader"
        )
        images = fn.decoders.image_random_crop(
            jpegs,
            device="cpu",
            output_type=types.RGB,
            random_area=[0.08, 1.0],
            random_aspect_ratio=[3 / 4, 4 / 3],
            num_attempts=10,
        )
        images = fn.resize(images, resize_x=S, resize_y=S)
        images = fn.crop_mirror_normalize(images, dtype=types.UINT8, output_layout="CHW", mirror=fn.random.coin_flip())
        return images, label

    p = pipe()
    p.build()
    it = DALIGenericIterator(
        p, ["image", "label"], reader_name="reader", last_batch_policy=LastBatchPolicy.DROP, auto_reset=True
    )
    return (lambda: it), (lambda b: len(b[0]["label"]))


# -- MosaicML Streaming (own venv): its 'jpeg' column keeps the file's bytes, decodes to PIL -----------------
def mosaic_prepare(w: Workload, raw: Path, work: Path) -> None:
    from PIL import Image
    from streaming import MDSWriter

    paths, labels = image_files(raw)
    with MDSWriter(out=str(work / "mds"), columns={"image": "jpeg", "label": "int64"}, size_limit="64mb") as out:
        for p, label in zip(paths, labels):
            with Image.open(p) as im:
                out.write({"image": im, "label": int(label)})


def _mosaic_dataset(*args, **kwargs):
    from streaming import StreamingDataset

    class Train(StreamingDataset):  # the pattern of Mosaic's examples: transform in __getitem__
        def __getitem__(self, i: int):
            row = super().__getitem__(i)
            return pil_train(row["image"]), row["label"]

    return Train(*args, **kwargs)


def mosaic_load(w: Workload, raw: Path, work: Path):
    import torch
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    ds = _mosaic_dataset(local=str(work / "mds"), shuffle=True, batch_size=w.batch_size)
    dl = torch.utils.data.DataLoader(
        ds, batch_size=w.batch_size, num_workers=WORKERS, collate_fn=collate_pairs, persistent_workers=True
    )
    return (lambda: dl), _count


# -- FFCV (own venv): RGBImageField + RandomResizedCropRGBImageDecoder (its ImageNet example) ---------------
class _PhotoRows(Files):
    """FFCV's writer takes an indexed dataset of (PIL image, label): the files, undecoded by us."""

    def __getitem__(self, i: int):
        from PIL import Image

        with Image.open(self.paths[i]) as im:
            return im.convert("RGB"), int(self.labels[i])


def ffcv_prepare(w: Workload, raw: Path, work: Path) -> None:
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter

    fields = {"image": RGBImageField(write_mode="jpg", jpeg_quality=90), "label": IntField()}
    DatasetWriter(str(work / "data.beton"), fields, num_workers=WORKERS).from_indexed_dataset(_PhotoRows(raw))


def ffcv_load(w: Workload, raw: Path, work: Path):
    from ffcv.fields.decoders import IntDecoder, RandomResizedCropRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import RandomHorizontalFlip, Squeeze, ToTensor, ToTorchImage

    loader = Loader(
        str(work / "data.beton"),
        batch_size=w.batch_size,
        num_workers=WORKERS,
        order=OrderOption.RANDOM,
        drop_last=True,
        os_cache=True,
        pipelines={
            "image": [RandomResizedCropRGBImageDecoder((S, S)), RandomHorizontalFlip(), ToTensor(), ToTorchImage()],
            "label": [IntDecoder(), ToTensor(), Squeeze()],
        },
    )
    return (lambda: loader), _count


# name -> (prepare, load); environments as in contenders.CONTENDERS
IMAGES = {
    "stoker": (stoker_prepare, stoker_load),
    "torch DataLoader (seed pattern)": (_nothing, torch_seed_load),
    "torch DataLoader (tuned: __getitems__)": (_nothing, torch_tuned_load),
    "torchdata StatefulDataLoader": (_nothing, torchdata_load),
    "HF datasets": (hf_prepare, hf_load),
    "WebDataset": (wds_prepare, wds_load),
    "LitData": (litdata_prepare, litdata_load),
    "SPDL": (_nothing, spdl_load),
    "NVIDIA DALI (CPU)": (_nothing, dali_load),
    "MosaicML Streaming": (mosaic_prepare, mosaic_load),
    "FFCV": (ffcv_prepare, ffcv_load),
}
