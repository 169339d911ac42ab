"""HDF5 types -> stoker columns: which column kind each dataset (or compound field) becomes, and its values.

One HDF5 dataset gives one or more :class:`Field`\\ s (one per column):

=====================================  ==========================================================
HDF5 type (as h5py maps it to numpy)   column
=====================================  ==========================================================
integer, float, bool, enum, complex    ``tensor`` of that dtype, native byte order (big-endian
                                       data is swapped once, when read); per-row shape = the
                                       dataset's shape after the first axis
array type / sub-array ``('<f8', (3,))``  ``tensor`` with the sub-shape appended: ``(*row, 3)``
compound                               one column per field, named ``<dataset>.<field>``; nested
                                       compounds ``<dataset>.<field>.<subfield>``; padding gaps
                                       between fields are not read
string, UTF-8 character set            ``string`` (``str``), fixed-length or variable-length
string, ASCII character set            ``binary`` (``bytes``, as h5py returns them; fixed-length
                                       ones without their trailing NULs); ``cast={"col": "str"}``
                                       decodes them as text; ``cast={"col": "uint8"}`` gives a
                                       fixed-length string's bytes as a ``tensor`` ``(*row, length)``,
                                       which also holds several strings per row
opaque                                 ``binary``
variable-length numbers                ``sequence`` (padded per batch by the loader, plus
                                       ``<name>_lengths``)
=====================================  ==========================================================

Refused with a :class:`~stoker.errors.SchemaError` that names the file, the dataset and the field:
dtypes torch has no tensor for (long double ``float128``, ``complex256``: pass ``cast={"col":
"float64"}``), strings or variable-length values with more than one per row (a row holds one),
object references, and HDF5 types h5py cannot map to numpy at all (H5T_TIME, quad precision).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from stoker.errors import ConfigError, InputError, SchemaError
from stoker.store.columns import Ragged
from stoker.store.format import Binary, Column, Sequence, String, Tensor

SEP = "."  # compound fields: column "<dataset>.<field>.<subfield>"

#: the numpy dtypes torch makes tensors of (``torch.from_numpy``); others need ``cast=``
TORCH_DTYPES = frozenset(
    np.dtype(name)
    for name in (
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    )
)
TEXT, BYTES = "str", "bytes"  # cast targets of string columns


@dataclass(frozen=True)
class Field:
    """One column read from an HDF5 dataset.

    Attributes:
        key: the dataset.
        path: the field inside a compound dataset (``()``: the whole value).
        name: the column's name: ``key``, or ``key.field.subfield``.
        kind: ``tensor``, ``sequence``, ``string`` or ``binary``.
        dtype: the native element dtype (tensor and sequence columns), after any cast.
        shape: the per-row shape of a tensor column.
        encoding: how a string column's bytes are decoded.
        nullterm: a fixed-length string stored null-terminated: it ends at its first NUL (what
            follows is not part of it, and h5py drops it).
    """

    key: str
    path: tuple[str, ...]
    name: str
    kind: str
    dtype: np.dtype | None = None
    shape: tuple[int, ...] = ()
    encoding: str = "utf-8"
    nullterm: bool = False

    def column(self) -> Column:
        """The store column this field is written as."""
        if self.kind == "tensor":
            return Tensor(self.dtype, self.shape)
        if self.kind == "sequence":
            return Sequence(self.dtype)
        return String() if self.kind == "string" else Binary()


def parse_cast(cast: Mapping[str, Any] | None) -> dict[str, str]:
    """``{"column": "float64" | "str" | "bytes"}`` checked; dtype targets named by numpy."""
    if cast is None:
        return {}
    if not isinstance(cast, Mapping):
        raise ConfigError(
            f"cast must be a mapping {{column: dtype}}, like {{'x': 'float64'}}; got {cast!r}", option="cast"
        )
    out = {}
    for name, target in cast.items():
        if target in (TEXT, BYTES, str, bytes):
            out[str(name)] = TEXT if target in (TEXT, str) else BYTES
            continue
        try:
            dt = np.dtype(target)
        except TypeError as exc:
            raise ConfigError(
                f"cast[{name!r}] = {target!r} is not a numpy dtype, 'str' or 'bytes'", option="cast"
            ) from exc
        if dt not in TORCH_DTYPES:
            raise ConfigError(
                f"cast[{name!r}] = {dt}: torch has no tensor of that dtype; cast to one of "
                f"{sorted(d.name for d in TORCH_DTYPES)}, 'str' or 'bytes'",
                option="cast",
            )
        out[str(name)] = dt.name
    return out


def fields_of(
    where: str, key: str, dt: np.dtype, shape: tuple[int, ...], cast: Mapping[str, str], path: tuple[str, ...] = ()
) -> list[Field]:
    """The columns of dataset ``key`` (``dt`` as h5py gives it, per-row shape ``shape``); ``path``: the
    compound field looked at. ``where`` names the file and dataset in errors; ``cast`` maps column
    names to target dtypes."""
    import h5py

    name = SEP.join((key, *path))
    field = f"{where}, field {SEP.join(path)!r}" if path else where
    if dt.names and dt.fields is not None:
        return [fl for sub in dt.names for fl in fields_of(where, key, dt.fields[sub][0], shape, cast, (*path, sub))]
    if dt.subdtype is not None:
        base, sub_shape = dt.subdtype
        return fields_of(where, key, base, (*shape, *sub_shape), cast, path)
    target = cast.get(name)
    string = h5py.check_string_dtype(dt)
    if dt.kind == "S" and target == "uint8":  # fixed-length strings as their bytes: [..., length]
        return [Field(key, path, name, "tensor", np.dtype(np.uint8), (*shape, dt.itemsize))]
    if string is not None or dt.kind in "SUV":
        _one_per_row(
            field,
            name,
            shape,
            "a string",
            f" (or read their bytes with the option cast {{{name!r}: 'uint8'}}, --cast {name}=uint8)"
            if dt.kind == "S"
            else "",
        )
        if target is not None and target not in (TEXT, BYTES):
            raise ConfigError(
                f"{field}: cast to {target!r}: a string column casts only to 'str', 'bytes' or (fixed-length) 'uint8'",
                option="cast",
            )
        utf8 = dt.kind == "U" or (string is not None and string.encoding == "utf-8")
        text = target == TEXT or (target is None and utf8)
        if dt.kind == "V" and target == TEXT:
            raise ConfigError(f"{field}: opaque data casts only to 'bytes', not 'str'", option="cast")
        return [Field(key, path, name, "string" if text else "binary")]
    vlen = h5py.check_vlen_dtype(dt)
    if vlen is not None:
        _one_per_row(field, name, shape, "a variable-length array")
        if h5py.check_string_dtype(np.dtype(vlen)) is not None or np.dtype(vlen).kind in "SUVO":
            raise SchemaError(
                f"{field} holds variable-length lists of {np.dtype(vlen)} strings (several per row); a string column "
                "holds one per row, so it has no column representation; leave it out of keys",
                column=name,
            )
        elem = _numeric(field, name, np.dtype(vlen), target, "variable-length arrays of")
        return [Field(key, path, name, "sequence", elem)]
    if h5py.check_ref_dtype(dt) is not None or dt.kind == "O":
        raise SchemaError(
            f"{field} holds {'object references' if h5py.check_ref_dtype(dt) else f'objects ({dt})'}, which have no "
            "column representation; leave it out of keys",
            column=name,
        )
    return [Field(key, path, name, "tensor", _numeric(field, name, dt, target, ""), shape)]


def _one_per_row(field: str, name: str, shape: tuple[int, ...], what: str, other: str = "") -> None:
    if shape:
        raise SchemaError(
            f"{field} holds {list(shape)} values of {what} per row; a string, binary or sequence column holds one "
            f"per row. Leave it out of keys{other}, or convert it yourself (one row per value)",
            column=name,
        )


def _numeric(field: str, name: str, dt: np.dtype, target: str | None, what: str) -> np.dtype:
    """The native dtype a numeric column holds (``target`` when cast), or a SchemaError."""
    if dt.names or dt.subdtype is not None or dt.kind not in "biufc":
        raise SchemaError(
            f"{field} holds {what} {dt}, which has no column representation; leave it out of keys", column=name
        )
    if target is not None:
        if target in (TEXT, BYTES):
            raise ConfigError(
                f"{field}: cast to {target!r}: a numeric column casts only to a numeric dtype", option="cast"
            )
        return np.dtype(target)
    native = dt.newbyteorder("=")
    if native not in TORCH_DTYPES:
        hint = "complex128" if dt.kind == "c" else "float64" if dt.kind == "f" else "int64"
        raise SchemaError(
            f"{field} has dtype {dt.name}{' (long double)' if dt.kind == 'f' and dt.itemsize > 8 else ''}, which torch "
            f"has no tensor for; read it as {hint} with the option cast {{{name!r}: {hint!r}}} "
            f"(command line: --cast {name}={hint})",
            column=name,
        )
    return native


def fixed_layout(ds: Any) -> bool:
    """Whether the stored bytes of h5py dataset ``ds`` are numpy rows of ``ds.dtype`` as they lie, so
    they can be memory-mapped or decoded from raw chunks: fixed-size types (numbers up to 8 bytes,
    complex, bool, enums, null-padded or null-terminated byte strings, sub-arrays and compounds of
    these) whose sizes and field offsets in the file are h5py's. False where HDF5 must convert (long
    double, space-padded strings, variable-length, references, ...)."""
    try:
        dt = np.dtype(ds.dtype)
    except (TypeError, ValueError):
        return False
    # a dataset of a sub-array type (not a field of one) is left to h5py: numpy expands such a
    # dtype into extra axes wherever an array is made of it
    return not dt.hasobject and dt.subdtype is None and _same_layout(ds.id.get_type(), dt)


def _same_layout(tid: Any, dt: np.dtype) -> bool:
    import h5py

    h5t = h5py.h5t
    if tid.get_size() != dt.itemsize:
        return False
    cls = tid.get_class()
    if dt.names and dt.fields is not None:
        if cls != h5t.COMPOUND or tid.get_nmembers() != len(dt.names):
            return False
        return all(
            tid.get_member_offset(i) == dt.fields[name][1] and _same_layout(tid.get_member_type(i), dt.fields[name][0])
            for i, name in enumerate(dt.names)
        )
    if dt.subdtype is not None:
        base, shape = dt.subdtype
        return cls == h5t.ARRAY and tuple(tid.get_array_dims()) == tuple(shape) and _same_layout(tid.get_super(), base)
    if dt.kind == "S":
        return cls == h5t.STRING and not tid.is_variable_str() and tid.get_strpad() != h5t.STR_SPACEPAD
    if dt.kind == "c":
        return cls == h5t.COMPOUND and dt.itemsize <= 16
    if dt.kind == "f":
        return cls == h5t.FLOAT and dt.itemsize <= 8
    return dt.kind in "biu" and cls in (h5t.INTEGER, h5t.ENUM, h5t.BITFIELD) and dt.itemsize <= 8


def nullterm_paths(tid: Any, dt: np.dtype, path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """The field paths of HDF5 type ``tid`` (numpy ``dt``) that are null-terminated fixed-length strings."""
    import h5py

    h5t = h5py.h5t
    cls = tid.get_class()
    if dt.names and dt.fields is not None and cls == h5t.COMPOUND:
        out: set[tuple[str, ...]] = set()
        for i, name in enumerate(dt.names):
            if i < tid.get_nmembers():
                out |= nullterm_paths(tid.get_member_type(i), dt.fields[name][0], (*path, name))
        return out
    if dt.subdtype is not None and cls == h5t.ARRAY:
        return nullterm_paths(tid.get_super(), dt.subdtype[0], path)
    if cls == h5t.STRING and not tid.is_variable_str() and tid.get_strpad() == h5t.STR_NULLTERM:
        return {path}
    return set()


def _check_cast(arr: np.ndarray, field: Field, where: str, first_row: int) -> None:
    """A SchemaError when casting ``arr`` to the field's dtype would change values beyond rounding.

    Byte order and float precision may change (a cast to float64 is what long double needs);
    integers out of the target's range, fractions cast to integers and complex numbers with an
    imaginary part cast to reals may not.
    """
    src, dst = arr.dtype, field.dtype
    if dst is None or np.can_cast(src, dst, "safe") or (src.kind == dst.kind and src.kind in "fc") or not arr.size:
        return
    bad = ""
    if src.kind == "c" and dst.kind != "c" and np.any(arr.imag != 0):
        bad = "complex values with an imaginary part"
    elif dst.kind in "iu":
        real = arr.real if src.kind == "c" else arr
        info = np.iinfo(dst)
        if src.kind in "fc" and not np.all(np.isfinite(real) & (np.floor(real) == real)):
            bad = "values that are not whole numbers"
        elif real.min() < info.min or real.max() > info.max:
            bad = f"values from {real.min()} to {real.max()}, outside {dst} ({info.min}..{info.max})"
    if bad:
        raise SchemaError(
            f"{where}, column {field.name!r}, rows from {first_row}: cast to {dst} would change {bad}; "
            "cast to a wider dtype",
            column=field.name,
            row=first_row,
        )


def values(field: Field, raw: np.ndarray, where: str, first_row: int = 0) -> Any:
    """The values of ``field`` in rows ``raw`` of its dataset (as h5py read them).

    Tensor columns: a native-order, C-contiguous array in the field's dtype. Sequence: a
    :class:`Ragged`. String and binary: a list of ``str`` / ``bytes``.
    """
    arr: Any = raw
    for part in field.path:
        arr = arr[part]
    if field.kind == "tensor":
        if arr.dtype.kind == "S":  # cast to uint8: the bytes of fixed-length strings
            got = np.ascontiguousarray(arr).view(np.uint8).reshape(len(arr), *field.shape)
            if field.nullterm:  # zero what follows a NUL, as h5py's conversion does
                got = np.where(np.cumsum(got == 0, axis=-1) > 0, np.uint8(0), got)
            return got
        if arr.dtype == field.dtype and arr.flags.c_contiguous and arr.flags.owndata:
            return arr
        _check_cast(arr, field, where, first_row)
        if arr.dtype.kind == "c" and field.dtype is not None and field.dtype.kind != "c":
            arr = arr.real  # checked: no imaginary part
        return np.array(arr, dtype=field.dtype, order="C")  # a copy: a strided field view never leaks out
    if field.kind == "sequence":
        rows = [np.asarray(r).reshape(-1) for r in arr]
        lengths = np.fromiter((len(r) for r in rows), np.int64, len(rows))
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.concatenate(rows) if rows else np.empty(0, field.dtype)
        _check_cast(flat, field, where, first_row)
        flat = flat.astype(field.dtype, copy=False)
        return Ragged(np.ascontiguousarray(flat), offsets)
    if arr.dtype.kind == "V":
        return [bytes(v) for v in arr]
    if field.nullterm:
        arr = [bytes(v).split(b"\0", 1)[0] for v in arr]
    if field.kind == "binary":
        return [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in arr]
    out = []
    for i, v in enumerate(arr):
        if isinstance(v, (bytes, np.bytes_)):
            try:
                v = bytes(v).decode(field.encoding)
            except UnicodeDecodeError as exc:
                raise InputError(
                    f"{where}, column {field.name!r}, row {first_row + i}: the string is not {field.encoding} "
                    f"({exc}); read it as bytes with the option cast {{{field.name!r}: 'bytes'}} (--cast {field.name}=bytes)"
                ) from exc
        out.append(str(v))
    return out
