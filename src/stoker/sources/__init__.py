"""Sources: HDF5 files, arrays, tables and any torch Dataset, into the loader or into a store.

    stoker.Loader(stoker.sources.HDF5("data.h5", "data,labels"), batch_size=256, shuffle=True)
    stoker.Loader(stoker.sources.Arrays(x, y), batch_size=256)        # the TensorDataset habit
    stoker.convert.hdf5("data.h5", "stores/data", keys="data,labels")
    stoker.convert.dataset(MyDataset(), "stores/pre", workers=8)     # resumable

See README.md in this directory for the file map. h5py is imported only when an HDF5 file
is opened.
"""

from stoker.sources.arrays import Arrays
from stoker.sources.dataset import dataset_to_store
from stoker.sources.hdf5 import HDF5
from stoker.sources.hdf5_convert import hdf5_to_store
from stoker.sources.tables import table_to_store
from stoker.sources.to_store import arrays_to_store

__all__ = ["Arrays", "HDF5", "arrays_to_store", "dataset_to_store", "hdf5_to_store", "table_to_store"]
