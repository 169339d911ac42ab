"""HDF5 files that reach beyond themselves or declare more than they hold (issue 36, items 1, 5, 8).

External links, external storage and virtual datasets read files the user never named: refused
by default with a StokerError naming the dataset and the file, read exactly as h5py reads them
when ``allow_external`` names their directory, and listed in ``files`` / the conversion report.
A small file declaring terabytes of never-written rows is refused before anything is written; a
conversion that cannot fit on its disk is refused before it writes. A missing file is a StokerError.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import stoker
from stoker.cli.main import main
from stoker.errors import ConfigError, InputError, StokerError, StoreNotFoundError, StoreWriteError

h5py = pytest.importorskip("h5py")
pytestmark = pytest.mark.faults

DATA = (np.arange(4000, dtype=np.float32).reshape(1000, 4) + 1) * 3


def _no_rows(count: int) -> None:
    """A conversion's progress callback that stops it at the first shard (the old code wrote 64 GiB here)."""
    raise AssertionError(f"{count} rows were written before the input was checked")


def _rows(source: stoker.sources.HDF5, key: str) -> np.ndarray:
    return np.asarray(source.read_rows(np.arange(len(source)))[key])


def _other(tmp_path: Path) -> Path:
    """``far/other.h5``: the data, contiguous (``x``) and chunked with gzip (``c``)."""
    (tmp_path / "far").mkdir()
    path = tmp_path / "far" / "other.h5"
    with h5py.File(path, "w") as f:
        f["pad"] = np.zeros(20_000)  # the linked data lies at another offset than anything in the named file
        f.create_dataset("x", data=DATA)
        f.create_dataset("c", data=DATA, chunks=(100, 4), compression="gzip")
    return path


@pytest.mark.parametrize("target", ["x", "c"])
def test_an_external_link_is_refused_then_read_as_h5py_reads_it(tmp_path, target):
    other = _other(tmp_path)
    path = tmp_path / "main.h5"
    with h5py.File(path, "w") as f:
        f["pad"] = np.zeros(5000)
        f["d"] = h5py.ExternalLink(str(other), target)
    with pytest.raises(ConfigError, match=r"main\.h5: key 'd' reads the file .*far/other\.h5 .*allow_external="):
        stoker.sources.HDF5(path, "d")
    with pytest.raises(ConfigError, match=r"key 'd' reads the file .*other\.h5"):
        stoker.convert.hdf5(path, tmp_path / "store", keys="d", progress=False)
    assert not (tmp_path / "store").exists()

    source = stoker.sources.HDF5(path, "d", allow_external=tmp_path / "far")
    np.testing.assert_array_equal(_rows(source, "d"), DATA)
    assert source.files == (str(path), str(other)) and source.report() == {"files": [str(path), str(other)]}
    batch = next(iter(stoker.Loader(source, batch_size=1000, num_workers=2)))
    np.testing.assert_array_equal(batch["d"].numpy(), DATA)
    out = stoker.convert.hdf5(path, tmp_path / "store", keys="d", progress=False, allow_external=[tmp_path / "far"])
    np.testing.assert_array_equal(stoker.open(out.path)[:]["d"], DATA)
    assert out.report["source"]["files"] == [str(path), str(other)]


def test_a_group_that_is_an_external_link_is_checked_before_it_is_followed(tmp_path):
    other = _other(tmp_path)
    path = tmp_path / "main.h5"
    with h5py.File(path, "w") as f:
        f["g"] = h5py.ExternalLink(str(other), "/")
    with pytest.raises(
        ConfigError, match=r"key 'g/x' reads the file .*other\.h5 \(the target of the external link 'g'\)"
    ):
        stoker.sources.HDF5(path, "g/x")
    with h5py.File(path, "a") as f:
        f["soft"] = h5py.SoftLink("/g")  # a soft link to the external link: followed here, before HDF5 does
    with pytest.raises(
        ConfigError, match=r"key 'soft/x' reads the file .*other\.h5 \(the target of the external link 'g'\)"
    ):
        stoker.sources.HDF5(path, "soft/x")
    with pytest.raises(ConfigError, match="allowed: .*elsewhere"):  # an allowed directory that does not hold it
        (tmp_path / "elsewhere").mkdir()
        stoker.sources.HDF5(path, "g/x", allow_external=str(tmp_path / "elsewhere"))
    np.testing.assert_array_equal(_rows(stoker.sources.HDF5(path, "g/x", allow_external=str(tmp_path)), "g/x"), DATA)


def test_a_relative_link_is_refused_while_a_file_of_its_name_outside_the_allowed_directory_exists(
    tmp_path, monkeypatch
):
    other = _other(tmp_path)
    path = tmp_path / "far" / "main.h5"
    with h5py.File(path, "w") as f:
        f["d"] = h5py.ExternalLink("other.h5", "x")  # HDF5 looks in the working directory, then beside main.h5
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    shutil.copy(other, "other.h5")
    with pytest.raises(ConfigError, match=r"reads the file .*cwd/other\.h5"):
        stoker.sources.HDF5(path, "d", allow_external=tmp_path / "far")
    Path("other.h5").unlink()
    np.testing.assert_array_equal(_rows(stoker.sources.HDF5(path, "d", allow_external=tmp_path / "far"), "d"), DATA)


def test_external_storage_is_refused_naming_the_file_then_read_from_an_allowed_directory(tmp_path):
    path = tmp_path / "ext.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("etc", (100,), dtype="S16", external=[("/etc/passwd", 0, 1600)])
    with pytest.raises(
        ConfigError, match=r"ext\.h5: dataset 'etc' reads the file /etc/passwd \(its external storage\)"
    ):
        stoker.sources.HDF5(path, "etc")
    with pytest.raises(ConfigError, match="/etc/passwd"):
        stoker.convert.hdf5(path, tmp_path / "store", progress=False)  # every dataset, the external one included
    assert main(["convert", "hdf5", str(path), str(tmp_path / "store"), "--no-progress"]) == 1
    assert not (tmp_path / "store").exists()

    raw = tmp_path / "raw" / "values.bin"
    raw.parent.mkdir()
    raw.write_bytes(DATA.tobytes())
    with h5py.File(path, "w") as f:
        f.create_dataset("x", (1000, 4), dtype=np.float32, external=[(str(raw), 0, DATA.nbytes)])
    source = stoker.sources.HDF5(path, "x", allow_external=[raw.parent])
    np.testing.assert_array_equal(_rows(source, "x"), DATA)
    assert source.files[1:] == (str(raw),)
    store = tmp_path / "store"
    assert main(["convert", "hdf5", str(path), str(store), "--allow-external", str(raw.parent), "--no-progress"]) == 0
    np.testing.assert_array_equal(stoker.open(store)[:]["x"], DATA)
    raw.write_bytes(DATA[:10].tobytes())  # h5py reads zeros past the end of a short external file, silently
    with pytest.raises(
        InputError, match=r"dataset 'x' reads 16000 bytes from byte 0 of .*values\.bin, which holds 160"
    ):
        stoker.sources.HDF5(path, "x", allow_external=[raw.parent])


def test_a_virtual_dataset_is_refused_then_read_with_its_sources_checked(tmp_path, capsys):
    other = _other(tmp_path)
    path = tmp_path / "vds.h5"
    with h5py.File(path, "w") as f:
        layout = h5py.VirtualLayout((1000, 4), np.float32)
        layout[:] = h5py.VirtualSource(str(other), "x", shape=(1000, 4))
        f.create_virtual_dataset("v", layout, fillvalue=-1)
        layout = h5py.VirtualLayout((1000, 4), np.float32)
        layout[:] = h5py.VirtualSource(str(tmp_path / "far" / "gone.h5"), "x", shape=(1000, 4))
        f.create_virtual_dataset("gone", layout, fillvalue=-1)
    with pytest.raises(
        ConfigError, match=r"dataset 'v' reads the file .*other\.h5 \(a source of the virtual dataset\)"
    ):
        stoker.sources.HDF5(path, "v")
    assert main(["convert", "hdf5", str(path), str(tmp_path / "s"), "--keys", "v", "--no-progress"]) == 1
    assert f"--allow-external {tmp_path / 'far'}" in capsys.readouterr().err
    source = stoker.sources.HDF5(path, "v", allow_external=tmp_path)
    np.testing.assert_array_equal(_rows(source, "v"), DATA)
    assert source.files == (str(path), str(other))
    source.close()
    # h5py reads a missing source file as the fill value, silently: refused
    with pytest.raises(InputError, match=r"dataset 'gone' reads the file .*gone\.h5.*does not exist"):
        stoker.sources.HDF5(path, "gone", allow_external=tmp_path)
    with h5py.File(path, "a") as f:  # mapping rows the source does not have: h5py reads the fill value there
        layout = h5py.VirtualLayout((2000, 4), np.float32)
        layout[:] = h5py.VirtualSource(str(other), "x", shape=(2000, 4))
        f.create_virtual_dataset("long", layout, fillvalue=-1)
        layout = h5py.VirtualLayout((1000, 4), np.float32)
        layout[500:] = h5py.VirtualSource(str(other), "x", shape=(2000, 4))[1500:]
        f.create_virtual_dataset("past", layout, fillvalue=-1)
    with pytest.raises(
        InputError,
        match=r"dataset 'long' maps 8000 values from source 'x' .*other\.h5 \(shape \(1000, 4\)\), some beyond",
    ):
        stoker.sources.HDF5(path, "long", allow_external=tmp_path)
    with pytest.raises(InputError, match=r"dataset 'past' maps 2000 values from source 'x'"):
        stoker.sources.HDF5(path, "past", allow_external=tmp_path)


def test_a_virtual_dataset_whose_source_has_external_storage_is_refused(tmp_path):
    (tmp_path / "far").mkdir()
    inner = tmp_path / "far" / "inner.h5"
    with h5py.File(inner, "w") as f:
        f.create_dataset("x", (100,), dtype="S16", external=[("/etc/passwd", 0, 1600)])
    path = tmp_path / "vds.h5"
    with h5py.File(path, "w") as f:
        layout = h5py.VirtualLayout((100,), "S16")
        layout[:] = h5py.VirtualSource(str(inner), "x", shape=(100,))
        f.create_virtual_dataset("v", layout)
    with pytest.raises(ConfigError, match=r"source 'x' in .*inner\.h5.* reads the file /etc/passwd"):
        stoker.sources.HDF5(path, "v", allow_external=tmp_path / "far")


@pytest.mark.parametrize("chunked", [True, False])
def test_a_small_file_declaring_64_gib_is_refused_before_anything_is_written(tmp_path, chunked, capsys):
    path = tmp_path / "bomb.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", (2**30, 16), dtype=np.float32, chunks=(2**14, 16) if chunked else None, fillvalue=0)
    assert path.stat().st_size < 2**20
    with pytest.raises(
        InputError, match=r"bomb\.h5: dataset 'x' declares 64\.0 GiB .* never written .*allow_fill=True"
    ):
        stoker.convert.hdf5(path, tmp_path / "store", progress=_no_rows, shard_size="1MB")
    assert not (tmp_path / "store").exists()
    with pytest.raises(InputError, match="never written"):
        stoker.sources.HDF5(path, "x")
    assert main(["convert", "hdf5", str(path), str(tmp_path / "store"), "--no-progress"]) == 1
    assert "--allow-fill" in capsys.readouterr().err
    assert not (tmp_path / "store").exists()


def test_a_conversion_larger_than_the_free_space_is_refused_before_it_writes(tmp_path):
    rows = 2 * shutil.disk_usage(tmp_path).free  # one byte a row: twice what the disk holds
    path = tmp_path / "big.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", (rows,), dtype=np.uint8, chunks=(2**20,))
    with pytest.raises(StoreWriteError, match=r"big\.h5 needs about .* free; free space there") as caught:
        stoker.convert.hdf5(path, tmp_path / "store", progress=_no_rows, shard_size="1MB", allow_fill=True)
    assert caught.value.errno == 28
    assert not (tmp_path / "store").exists()


def test_a_chunked_dataset_of_2_to_the_40_rows_is_a_stoker_error_naming_its_size(tmp_path):
    # 2**24 chunks: the old code indexed them all in memory (chunks of 1000 rows made that a numpy
    # MemoryError of 8 GiB), then wrote until the disk was full
    path = tmp_path / "huge.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("huge", (2**40,), dtype=np.uint8, chunks=(2**16,))
    with pytest.raises(InputError, match=r"dataset 'huge' declares 1\.0 TiB \(shape \(1099511627776,\)\)"):
        stoker.convert.hdf5(path, tmp_path / "store", progress=_no_rows, shard_size="1MB")
    with pytest.raises(StokerError, match="1.0 TiB"):  # no disk here holds it
        stoker.convert.hdf5(path, tmp_path / "store", progress=_no_rows, shard_size="1MB", allow_fill=True)
    # read as a source when asked (rows never written are HDF5's fill value); HDF5's chunk index serves it
    source = stoker.sources.HDF5(path, "huge", allow_fill=True)
    assert len(source) == 2**40
    assert source.read_rows(np.array([0, 2**40 - 1]))["huge"].tolist() == [0, 0]


def test_a_missing_file_is_a_stoker_error_naming_it(tmp_path):
    missing = tmp_path / "nope.h5"
    for call in (lambda: stoker.sources.HDF5(missing), lambda: stoker.convert.hdf5(missing, tmp_path / "s")):
        with pytest.raises(StoreNotFoundError, match=r"no HDF5 file at .*nope\.h5: the path does not exist") as caught:
            call()
        assert isinstance(caught.value, FileNotFoundError) and caught.value.path == missing


def test_allow_options_are_checked(tmp_path):
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(3)
    with pytest.raises(ConfigError, match=r"allow_external must name existing directories; .*nowhere"):
        stoker.sources.HDF5(path, "x", allow_external=[tmp_path / "nowhere"])
    with pytest.raises(ConfigError, match="allow_fill must be True or False"):
        stoker.convert.hdf5(path, tmp_path / "s", allow_fill="yes")  # type: ignore[arg-type]
    assert stoker.sources.HDF5(path, "x").files == (str(path),)
