"""``stoker convert images SRC STORE``: a folder of images to a store (JPEG bytes or resized arrays).

SRC is a class-per-folder tree (ImageFolder layout) or a flat folder with a labels.csv /
labels.json (or --labels FILE). Prints what was written and what was skipped; exits 1 when a
bad image stops the conversion (the message names the file; --on-error skip goes on).
"""

from __future__ import annotations

import argparse
import sys

from stoker.cli.output import progress


def _size(text: str) -> int | tuple[int, int]:
    try:
        parts = [int(x) for x in text.lower().replace("x", ",").split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--size takes N or HxW (pixels), not {text!r}") from None
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise argparse.ArgumentTypeError(f"--size takes N or HxW (pixels), not {text!r}")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("images", help="image files to a store (JPEG bytes or resized uint8 arrays)", description=__doc__)
    p.add_argument("src", help="folder of images: SRC/<class>/<image>, or flat with labels.csv/labels.json")
    p.add_argument("store", help="the store directory to write")
    p.add_argument("--mode", choices=("encoded", "resized"), default="encoded",
                   help="encoded: keep JPEG bytes (decode and augment when loading); resized: uint8 arrays (default encoded)")
    p.add_argument("--size", type=_size, default=256, help="resized: output side N or HxW (shorter side resized, center cropped; default 256)")
    p.add_argument("--max-side", type=int, default=None, help="encoded: re-encode images whose longer side exceeds this")
    p.add_argument("--quality", type=int, default=90, help="JPEG quality of re-encoded images (default 90)")
    p.add_argument("--labels", default=None, help="a CSV (file,label) or JSON labels file for a flat folder")
    p.add_argument("--on-error", choices=("raise", "skip"), default="raise", help="a bad image stops the conversion (raise) or is skipped and reported")
    p.add_argument("--workers", type=int, default=None, help="threads (default: the usable cores)")
    p.add_argument("--shard-size", default="256MB", help="bytes per shard (default 256MB)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing store")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from stoker.vision.convert import convert_images
    from stoker.vision.finder import find_images

    images = find_images(args.src, args.labels)
    with progress(total=len(images), desc="converting", unit=" img") as bar:
        report = convert_images(
            images, args.store, args.mode, size=args.size, max_side=args.max_side, quality=args.quality,
            on_error=args.on_error, workers=args.workers, shard_size=args.shard_size, overwrite=args.overwrite,
            progress=bar.update,
        )  # fmt: skip
    print(report)
    if images.classes:
        print(f"classes  {len(images.classes)}: {', '.join(images.classes[:10])}{' ...' if len(images.classes) > 10 else ''}")
    for s in report.skipped[:20]:
        print(f"skipped  {s.file}: {s.reason}", file=sys.stderr)
    if len(report.skipped) > 20:
        print(f"skipped  ... and {len(report.skipped) - 20} more (all listed in the manifest's metadata)", file=sys.stderr)
    return 0
