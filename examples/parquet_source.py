"""A new source kind in one file: the rows of a Parquet file, read row group by row group.

    loader = stoker.Loader(ParquetRows("table.parquet", ["x", "y"]), batch_size=256, shuffle=True)

Written against the public contract alone (``stoker.BatchSource``); tests/contract runs it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import stoker


class ParquetRows(stoker.BatchSource):
    """Numeric columns of a Parquet file as batches of numpy arrays (one read per row group touched)."""

    def __init__(self, path: str, columns: list[str] | None = None) -> None:
        self.path = str(path)
        meta = pq.ParquetFile(self.path).metadata
        self.columns = columns or pq.read_schema(self.path).names
        self.starts = np.cumsum([0] + [meta.row_group(g).num_rows for g in range(meta.num_row_groups)])

    def __len__(self) -> int:
        return int(self.starts[-1])

    def read(self, chunk: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
        file = pq.ParquetFile(self.path)  # one handle per call: workers read in parallel
        return [self._batch(file, np.asarray(idx)) for idx in chunk]

    def _batch(self, file: pq.ParquetFile, rows: np.ndarray) -> dict[str, np.ndarray]:
        bad = rows[(rows < 0) | (rows >= len(self))]
        if bad.size:
            raise IndexError(f"row {int(bad[0])} is out of range for {self.path} ({len(self)} rows)")
        groups = np.searchsorted(self.starts, rows, side="right") - 1
        parts = []
        for g in np.unique(groups):
            local = rows[groups == g] - self.starts[g]
            parts.append(file.read_row_group(int(g), columns=self.columns).take(pa.array(local)))
        # parts follow the row groups; put the rows back in the batch's (the sampler's) order
        table = pa.concat_tables(parts).take(pa.array(np.argsort(np.argsort(groups, kind="stable"))))
        return {c: table.column(c).to_numpy() for c in self.columns}
