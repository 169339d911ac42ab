"""Which columns an HDF5 file gives for ``keys``: datasets found, types mapped, filters checked.

Shared by ``sources.HDF5`` and ``convert.hdf5``. ``keys`` name datasets (``"group/data"``) or,
in a compound dataset, fields (``"table.col1"``, ``"table.pos.x"``: the dataset's name, ``.``,
the field path; a field path that is a nested compound takes all its fields). A dataset whose
filters h5py cannot run (a plugin not installed) is refused at open, naming the filter and the
package that provides it; ``hdf5plugin``, when installed, is imported first (it registers
blosc, blosc2, bzip2, lz4, zstd, zfp, ...). Files other than the one named and declared sizes
are checked on the way (``hdf5_bounds.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stoker.errors import ConfigError, InputError, SchemaError
from stoker.sources._common import check_lengths
from stoker.sources.hdf5_bounds import Bounds
from stoker.sources.hdf5_types import SEP, TORCH_DTYPES, Field, fields_of, fixed_layout, nullterm_paths

# HDF5 filter id -> (name, what provides a plugin for h5py)
FILTERS = {
    1: ("deflate (gzip)", "HDF5 itself"),
    2: ("shuffle", "HDF5 itself"),
    3: ("fletcher32", "HDF5 itself"),
    4: ("szip", "an HDF5 built with szip/libaec (pip install hdf5plugin)"),
    5: ("nbit", "HDF5 itself"),
    6: ("scaleoffset", "HDF5 itself"),
    305: ("lzo", "PyTables only (no h5py plugin on PyPI); repack with: ptrepack --complib=blosc:zstd IN OUT"),
    307: ("bzip2", "pip install hdf5plugin"),
    32000: ("lzf", "h5py itself"),
    32001: ("blosc", "pip install hdf5plugin"),
    32004: ("lz4", "pip install hdf5plugin"),
    32008: ("bitshuffle", "pip install hdf5plugin"),
    32013: ("zfp", "pip install hdf5plugin"),
    32015: ("zstd", "pip install hdf5plugin"),
    32017: ("sz", "pip install hdf5plugin"),
    32018: ("fcidecomp", "pip install hdf5plugin"),
    32024: ("sz3", "pip install hdf5plugin"),
    32026: ("blosc2", "pip install hdf5plugin"),
}


def h5py_module() -> Any:
    """h5py, with the filter plugins of ``hdf5plugin`` registered when it is installed."""
    try:
        import h5py
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError("reading HDF5 needs h5py: pip install 'stoker[hdf5]'", option="h5py") from exc
    try:
        import hdf5plugin  # noqa: F401 - registers blosc, bzip2, lz4, zstd, ... with h5py's HDF5
    except ImportError:  # optional: a dataset needing one of its filters is refused at open, naming it
        pass
    return h5py


@dataclass(frozen=True)
class KeyInfo:
    """One HDF5 dataset read for its columns: per-row shape, dtype, chunk rows (0 if contiguous).

    ``files``: the files other than the one named that reading it reads (then it is read
    through h5py: the fast paths map the named file only). ``plain``: the dataset is one numeric column, its rows as stored (no fields, strings, vlen
    or cast). ``fixed``: its stored bytes are rows of ``file_dtype`` (``hdf5_types.fixed_layout``),
    so the memory-mapped and chunk-decoding fast paths apply. ``fields``: its columns.
    """

    key: str
    shape: tuple[int, ...]
    dtype: np.dtype
    chunk_rows: int
    offset: int | None = None  # byte offset of a contiguous, unfiltered dataset (memory-mappable)
    file_dtype: np.dtype | None = None  # the dtype as stored (byte order included)
    fields: tuple[Field, ...] = ()
    plain: bool = True
    fixed: bool = True
    files: tuple[str, ...] = ()

    @property
    def row_bytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def parse_keys(keys: str | list[str] | tuple[str, ...] | Mapping[str, str] | None) -> tuple[str, ...] | None:
    """``"data,labels"``, ``["data", "labels"]`` or a mapping's keys -> a tuple; ``None`` stays None (all datasets)."""
    if keys is None:
        return None
    if isinstance(keys, Mapping):
        keys = list(keys)
    if isinstance(keys, str):
        keys = [k.strip() for k in keys.split(",")]
    out = tuple(str(k) for k in keys)
    if not out or any(not k for k in out):
        raise ConfigError(f"keys must name HDF5 datasets, like 'data,labels'; got {keys!r}", option="keys")
    if len(set(out)) != len(out):
        raise ConfigError(f"keys {list(out)} name a dataset twice", option="keys")
    return out


def _get(f: Any, key: str, bounds: Bounds) -> Any:
    bounds.links(f, key)  # before HDF5 follows an external link
    try:
        return f.get(key)
    except (KeyError, OSError, ValueError):  # a soft or external link that does not resolve
        return None


def _dataset_info(f: Any, bounds: Bounds, key: str, cast: Mapping[str, str]) -> KeyInfo:
    ds = f[key]
    where = f"{bounds.path}: dataset {key!r}"
    if ds.ndim == 0:
        raise SchemaError(f"{where} is a scalar; a column needs one row per entry along its first axis", column=key)
    try:
        dtype = np.dtype(ds.dtype)
    except (TypeError, ValueError) as exc:  # H5T_TIME, quad precision, ...: h5py has no numpy type for it
        raise SchemaError(
            f"{where} has an HDF5 type h5py cannot read ({exc}), so it has no column representation; leave it out of keys",
            column=key,
        ) from exc
    _check_filters(ds, where)
    files = bounds.dataset(ds, where, f.filename)
    fields = tuple(fields_of(where, key, dtype, tuple(ds.shape[1:]), cast))
    nullterm = nullterm_paths(ds.id.get_type(), dtype)
    if nullterm:  # read from the file's bytes, such a string ends at its first NUL
        fields = tuple(dataclasses.replace(fl, nullterm=fl.path in nullterm) for fl in fields)
    plain = (
        len(fields) == 1 and fields[0].kind == "tensor" and not fields[0].path and dtype.kind in "biufc"
        and dtype.newbyteorder("=") == fields[0].dtype and fields[0].dtype in TORCH_DTYPES
    )  # fmt: skip
    chunk_rows = ds.chunks[0] if ds.chunks else 0
    fixed = fixed_layout(ds)
    offset = None
    if fixed and ds.chunks is None and ds.compression is None and not (ds.external or ds.is_virtual or files):
        offset = ds.id.get_offset()  # None while no data was ever written (all fill value)
    row_dtype = fields[0].dtype if plain and fields[0].dtype is not None else dtype
    shape = tuple(ds.shape[1:])
    return KeyInfo(key, shape, row_dtype, int(chunk_rows), offset, dtype, fields, plain, fixed, files)


def _check_filters(ds: Any, where: str) -> None:
    """A ConfigError naming the filter and its provider when h5py cannot decode ``ds``."""
    h5py = h5py_module()
    plist = ds.id.get_create_plist()
    for i in range(plist.get_nfilters()):
        code = int(plist.get_filter(i)[0])
        if not h5py.h5z.filter_avail(code):
            name, provider = FILTERS.get(code, (f"id {code}", "see https://github.com/HDFGroup/hdf5_plugins"))
            raise ConfigError(
                f"{where} is compressed with the HDF5 filter {name} (id {code}), which this h5py cannot decode: "
                f"no plugin for it is installed. It comes from {provider}.",
                option="keys",
            )


def describe(
    f: Any, bounds: Bounds, keys: tuple[str, ...] | None, cast: Mapping[str, str] | None = None
) -> tuple[tuple[KeyInfo, ...], int, dict[str, str]]:
    """Check ``keys`` in the open file ``f`` (``bounds.path``) and describe them, within ``bounds``.

    Returns the datasets read (each with the fields selected), the common number of rows, and
    ``{column name: the key that selected it}`` (for renaming). Every ``cast`` entry must name a
    selected column.
    """
    h5py = h5py_module()
    path = bounds.path
    cast = dict(cast or {})
    present: list[str] = []
    f.visititems(lambda name, obj: present.append(name) if isinstance(obj, h5py.Dataset) else None)
    if keys is None:
        keys = tuple(present)
        if not keys:
            raise SchemaError(f"{path} holds no datasets")
    chosen: dict[str, dict[str, Field]] = {}  # dataset -> column name -> field, in order of keys
    infos: dict[str, KeyInfo] = {}
    selected_by: dict[str, str] = {}
    for key in keys:
        obj = _get(f, key, bounds)
        dataset = key if isinstance(obj, h5py.Dataset) else _compound_prefix(f, key, bounds)
        if dataset is None:
            what = "is a group, not a dataset" if obj is not None else "is not in the file"
            raise SchemaError(f"{path}: key {key!r} {what}; the datasets present are {present}", column=key)
        if dataset not in infos:
            infos[dataset] = _dataset_info(f, bounds, dataset, cast)
        picked = [
            fl for fl in infos[dataset].fields if fl.name == key or fl.name.startswith(key + SEP) or dataset == key
        ]
        if not picked:
            names = [fl.name for fl in infos[dataset].fields]
            raise SchemaError(
                f"{path}: dataset {dataset!r} has no field {key[len(dataset) + 1 :]!r}; its columns are {names}",
                column=key,
            )
        for fl in picked:
            if fl.name in selected_by:
                raise ConfigError(f"keys {list(keys)} select column {fl.name!r} twice", option="keys")
            selected_by[fl.name] = key
            chosen.setdefault(dataset, {})[fl.name] = fl
    unknown = sorted(set(cast) - set(selected_by))
    if unknown:
        raise ConfigError(
            f"cast names {unknown}, which are not among the columns read: {list(selected_by)}", option="cast"
        )
    out = []
    for dataset, fields in chosen.items():
        info = infos[dataset]
        whole = len(fields) == len(info.fields)
        out.append(info if whole else dataclasses.replace(info, fields=tuple(fields.values()), plain=False))
    rows = check_lengths({info.key: len(f[info.key]) for info in out}, f"{path}")
    return tuple(out), rows, selected_by


def _compound_prefix(f: Any, key: str, bounds: Bounds) -> str | None:
    """The compound dataset whose field ``key`` names (``"table.col"`` -> ``"table"``), or None."""
    h5py = h5py_module()
    start = key.rfind("/") + 1
    at = key.find(SEP, start)
    while at > 0:
        obj = _get(f, key[:at], bounds)
        if isinstance(obj, h5py.Dataset):
            try:
                if obj.dtype.names:
                    return key[:at]
            except (TypeError, ValueError):
                return None
        at = key.find(SEP, at + 1)
    return None


def read_error(path: Path, key: str, start: int, stop: int, exc: Exception) -> InputError:
    """The error of h5py failing to read rows ``start:stop`` of dataset ``key``."""
    return InputError(
        f"{path}: dataset {key!r}: h5py cannot read rows {start}..{stop - 1} ({type(exc).__name__}: {exc}); the "
        "file is corrupt or truncated, or a filter failed on its data",
        path=path,
    )
