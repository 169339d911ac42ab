"""Sources: HDF5 files and arrays read straight into the loader, without converting them.

    stoker.Loader(stoker.sources.HDF5("data.h5", "data,labels"), batch_size=256, shuffle=True)
    stoker.Loader(stoker.sources.Arrays(x, y), batch_size=256)        # the TensorDataset habit

To write these (or tables, or any torch Dataset) into a store, see ``stoker.convert``.
See README.md in this directory for the file map. h5py is imported only when an HDF5 file
is opened.
"""

from stoker.sources.arrays import Arrays
from stoker.sources.hdf5 import HDF5

__all__ = ["Arrays", "HDF5"]
