"""NVIDIA DALI's training pipeline for bench_cuda's JPEG rows: the contender issue 14 names for nvJPEG.

``fn.readers.file`` (shuffled) -> ``fn.decoders.image_random_crop`` (torchvision's RandomResizedCrop
parameters) -> ``fn.resize`` to 224 -> ``fn.crop_mirror_normalize`` (random flip, ImageNet mean/std,
float CHW), through ``DALIGenericIterator``: DALI's own ImageNet recipe. ``device="gpu"`` decodes with
nvJPEG (``device="mixed"``) and runs the rest on the GPU, as bench_cuda's stoker nvJPEG row does;
``device="cpu"`` is the same graph on the CPU, which is how it is checked on a machine without a GPU:

    .venv-peers/bin/python benchmarks/dali_gpu.py --data data --device cpu   # DALI is in the peers venv
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def loader(
    files: Sequence[str], labels: Sequence[int], batch_size: int, device: str, threads: int, seed: int = 0
) -> Any:
    """A ``DALIGenericIterator`` over ``files`` (shuffled, epochs without end) giving ``image`` (float
    NCHW, normalized, on ``device``) and ``label``; ``device`` is ``"gpu"`` or ``"cpu"``."""
    from nvidia.dali import fn, pipeline_def, types
    from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

    if device not in ("gpu", "cpu"):
        raise ValueError(f"device must be 'gpu' or 'cpu', not {device!r}")

    @pipeline_def(batch_size=batch_size, num_threads=threads, device_id=0 if device == "gpu" else None, seed=seed)
    def pipe() -> Any:
        jpegs, label = fn.readers.file(files=list(files), labels=list(labels), random_shuffle=True, name="reader")
        images = fn.decoders.image_random_crop(
            jpegs,
            device="mixed" if device == "gpu" else "cpu",
            output_type=types.RGB,
            random_area=[0.08, 1.0],
            random_aspect_ratio=[3 / 4, 4 / 3],
            num_attempts=10,
        )
        images = fn.resize(images, resize_x=224, resize_y=224)
        images = fn.crop_mirror_normalize(
            images, dtype=types.FLOAT, output_layout="CHW", mean=MEAN, std=STD, mirror=fn.random.coin_flip()
        )
        return images, label

    p = pipe()
    p.build()
    return DALIGenericIterator(
        p, ["image", "label"], reader_name="reader", last_batch_policy=LastBatchPolicy.DROP, auto_reset=True
    )


def batches(it: Any) -> Iterator[dict[str, Any]]:
    """One epoch of ``loader``'s batches as ``{"image", "label"}`` dicts (it yields one dict per pipeline)."""
    for out in it:
        yield out[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="data")
    ap.add_argument("--device", default="cpu", choices=("cpu", "gpu"))
    ap.add_argument("--batches", type=int, default=8)
    args = ap.parse_args()
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from stoker.vision import find_images

    found = find_images(Path(args.data) / "images" / "photos")
    it = loader(found.paths, list(found.labels or [0] * len(found)), 32, args.device, threads=2)
    t0, n = time.perf_counter(), 0
    for k, b in enumerate(batches(it)):
        image, label = b["image"], b["label"]
        assert tuple(image.shape) == (32, 3, 224, 224) and str(image.dtype) == "torch.float32", image.shape
        assert len(label) == 32 and float(image.abs().max()) < 10  # normalized, not 0..255
        n += 1
        if k + 1 == args.batches:
            break
    print(
        f"dali {args.device}: {n} batches of 32, image {tuple(image.shape)} {image.dtype} on {image.device}, "
        f"{n * 32 / (time.perf_counter() - t0):.0f} img/s"
    )


if __name__ == "__main__":
    main()
