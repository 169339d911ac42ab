"""``stoker convert images SRC STORE``: a folder of images to a store (JPEG bytes or resized arrays).

SRC is a class-per-folder tree (ImageFolder layout) or a flat folder with a labels.csv /
labels.json (or --labels FILE). Prints what was written and what was skipped; exits 1 when a
bad image stops the conversion (the message names the file; --on-error skip goes on).
"""

from __future__ import annotations

import argparse
import sys

from stoker.cli.convert_common import (
    kind_parser,
    label_names,
    label_names_options,
    on_error_option,
    shared,
    shared_options,
    summary,
)


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
    p = kind_parser(sub, "images", "image files to a store (JPEG bytes or resized uint8 arrays)", __doc__)
    p.add_argument(
        "src", help="folder of images: SRC/<class>/<image>, or flat with labels.csv/labels.json; or s3://bucket/photos/"
    )
    p.add_argument("store", help="the store directory to write")
    p.add_argument(
        "--mode",
        choices=("encoded", "resized"),
        default="encoded",
        help="encoded: keep JPEG bytes (decode and augment when loading); resized: uint8 arrays (default encoded)",
    )
    p.add_argument(
        "--size",
        type=_size,
        default=256,
        help="resized: output side N or HxW (shorter side resized, center cropped; default 256)",
    )
    p.add_argument(
        "--max-side", type=int, default=None, help="encoded: re-encode images whose longer side exceeds this"
    )
    p.add_argument("--quality", type=int, default=90, help="JPEG quality of re-encoded images (default 90)")
    p.add_argument("--labels", default=None, help="a CSV (file,label) or JSON labels file for a flat folder")
    label_names_options(p, "class names", "image or text store")
    on_error_option(p, help="a bad image stops the conversion (raise) or is skipped and reported")
    shared_options(p, workers="decoding threads (default: the usable cores; 0: in this thread)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import stoker.convert

    result = stoker.convert.images(
        args.src,
        args.store,
        args.mode,
        size=args.size,
        max_side=args.max_side,
        quality=args.quality,
        labels=args.labels,
        label_names=label_names(args),
        on_error=args.on_error,
        **shared(args),
    )
    summary(result, noun="images", skipped="bad image files", storage_options=args.storage_options)
    classes = result.report["classes"]
    if classes:
        print(f"classes  {len(classes)}: {', '.join(classes[:10])}{' ...' if len(classes) > 10 else ''}")
    skipped = result.report["skipped"]
    for s in skipped[:20]:
        print(f"skipped  {s.file}: {s.reason}", file=sys.stderr)
    if len(skipped) > 20:
        print(f"skipped  ... and {len(skipped) - 20} more (all listed in the manifest's metadata)", file=sys.stderr)
    ignored = result.report["ignored"]
    if ignored:
        print(f"ignored  {len(ignored)} non-image files")
    return 0
