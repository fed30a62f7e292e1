"""Rows of a memory-mapped Arrow table, taken record batch by record batch.

A table read from an IPC file is one chunk per record batch, and Arrow's `take` on a
table concatenates every chunk of each column first: a copy of the whole file (the corpus
index's `chunks.arrow` is ~1 GB at 1M chunks) onto the heap, to read a handful of rows.
`BatchedRows.take` takes each row from its own record batch instead.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


class BatchedRows:
    """`table`'s rows by position, read from the record batch that holds each."""

    def __init__(self, table: pa.Table):
        self.table = table
        self._batches = table.to_batches()
        self._starts = np.cumsum([0] + [b.num_rows for b in self._batches])

    def take(self, rows: np.ndarray | list[int], columns: list[str]) -> pa.Table:
        """These rows (in this order) of these columns."""
        rows = np.asarray(rows, dtype=np.int64)
        schema = self.table.select(columns).schema
        if not len(rows):
            return schema.empty_table()
        which = np.searchsorted(self._starts, rows, side="right") - 1
        order = np.argsort(which, kind="stable")
        parts = [self._batches[b].select(columns).take(pa.array(rows[order[which[order] == b]] - self._starts[b]))
                 for b in np.unique(which)]
        taken = pa.Table.from_batches(parts, schema=schema)
        back = np.empty(len(rows), dtype=np.int64)
        back[order] = np.arange(len(rows))
        return taken.take(pa.array(back)) if len(parts) > 1 else taken  # the rows taken only: small
