"""``stoker convert KIND SRC STORE``: build a store from other data.

Each kind lives in its own module with ``register(subparsers)``; add it to ``KINDS``.
"""

from __future__ import annotations

import argparse
import importlib

DESCRIPTION = "Build a store from other data. Run 'stoker convert KIND --help' for the options of each kind."

KINDS: tuple[str, ...] = (
    "stoker.cli.convert_images",
    "stoker.cli.convert_text",
    "stoker.cli.convert_hdf5",
    "stoker.cli.convert_arrays",
    "stoker.cli.convert_table",
    "stoker.cli.convert_dataset",
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "convert", help="build a store from text, images, HDF5, tables or a Dataset", description=DESCRIPTION
    )
    kinds = p.add_subparsers(dest="kind", metavar="KIND")
    for name in KINDS:
        importlib.import_module(name).register(kinds)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
