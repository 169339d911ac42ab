"""Every dataset of the HDF5 test files of PyTables, h5py and pymatreader (MATLAB v7.3), read by stoker both
ways and compared with h5py (at most 60 datasets per file: ``hdf5_sweep.MAX_DATASETS``).

Each attempt (``sources.HDF5`` through the Loader, and ``convert.hdf5`` -> ``stoker.open``) loads
equal to h5py or is refused with a StokerError naming the file and the dataset, for a reason
that means there is no column to make (``REASONS``); never a raw h5py/numpy/torch error.
"""

from __future__ import annotations

import re

import pytest
from hdf5_sweep import Attempt, sweep, tally

# What may be refused: things with no column representation, or that h5py itself cannot read.
REASONS = {
    "scalar": "is a scalar",
    "several strings per row": "values of a string per row",
    "lists of strings": "variable-length lists of",
    "torch dtype (cast= offered)": "torch has no tensor for",
    "HDF5 type h5py cannot read": "h5py cannot read",
    "filter without a plugin": "which this h5py cannot decode",
    "object references (MATLAB cell arrays)": "holds object references",
}
MUST_LOAD = [  # datasets that crashed or were refused before issue 17, part 1
    ("attr-u16.h5", "wfm_group0/axes/axis1/data_vector/data"),  # chunked+gzip, no fill value defined
    ("blosc_bigendian.h5", "i8"),  # blosc (hdf5plugin), big-endian
    ("nested-type-with-gaps.h5", "nestedtype"),  # nested compound with padding gaps
    ("non-chunked-table.h5", "test_var/structure variable"),  # big-endian compound with a sub-array field
    ("smpl_compound_chunked.h5", "CompoundChunked"),
    ("array_mdatom.h5", "arr"),  # sub-array dtype ('<f8', (3,))
    ("vlunicode_endian.h5", "vlunicode_big"),
    ("ex-noattr.h5", "columns/name"),  # fixed-length S16
    ("vlen_string_dset.h5", "DS1"),  # h5py: vlen strings
    ("compound-dtype-complex.h5", ">c16"),  # h5py: complex stored as a big-endian compound
    ("test_szip.h5", "dset_szip"),
    ("bti_raw_v73.mat", "#refs#/kd"),  # MATLAB v7.3: gzip chunks (42, 191) written by MATLAB's HDF5
    ("sparse_v73.mat", "A_wide/jc"),
]


@pytest.fixture(scope="module")
def attempts(hdf5_samples) -> list[Attempt]:
    got = sweep(hdf5_samples)
    print(tally(got))  # shown with -s or -rA: the tally, and every refusal with its reason
    return got


def test_the_samples_are_there(attempts):
    assert len({a.file for a in attempts}) >= 50  # 47 of PyTables, 4 of h5py, 7 MATLAB files; some hold no dataset
    assert len({(a.file, a.key) for a in attempts}) >= 400


def test_nothing_loads_wrong_or_crashes(attempts):
    wrong = [a for a in attempts if a.outcome == "wrong"]
    assert not wrong, tally(wrong)


def test_refusals_name_file_and_dataset_and_have_no_column_to_make(attempts):
    for a in attempts:
        if a.outcome != "refused":
            continue
        assert a.file in a.detail and re.search(rf"dataset '{re.escape(a.key)}'", a.detail), a
        assert any(words in a.detail for words in REASONS.values()), a


def test_what_has_a_column_representation_loads_equal(attempts):
    outcome = {(a.file, a.key, a.path): a.outcome for a in attempts}
    for file, key in MUST_LOAD:
        for path in ("source", "convert"):
            got = outcome.get((file, key, path))
            assert got == "equal", (file, key, path, got)
    assert sum(a.outcome == "equal" for a in attempts) >= 660
