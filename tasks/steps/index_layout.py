"""The corpus index's chunks ordered by document and start, as arrays.

`tasks/core/chunk_split.Layout` answers the chunk windows' questions (the chunk before,
the chunk after, the chunks overlapping a span) from a dict of Python `Chunk`s — ~500 bytes
of heap a chunk, 5 GB at 10M chunks, in every process that joins windows. `IndexLayout`
answers the same questions, in the same order, from four integer arrays over the index's
memory-mapped chunk table (~36 bytes a chunk); a `Chunk` exists only for a chunk asked about.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from ragspan.tasks.core.chunk_split import Chunk


class IndexLayout:
    """Layout's before / after / overlapping over the index's chunk table (chunk_id,
    doc_id, char_start, char_end); `row_of` a returned chunk's row in that table."""

    def __init__(self, table: pa.Table) -> None:
        docs = table.column("doc_id").unique()
        codes = pc.index_in(table.column("doc_id"), value_set=docs).to_numpy()
        starts = table.column("char_start").to_numpy()
        ends = table.column("char_end").to_numpy()
        # By document, then start, then end; ties in table order (lexsort is stable), as
        # Layout's per-document sort of chunks in table order.
        self._order = np.lexsort((ends, starts, codes))
        sorted_codes = codes[self._order]
        self._starts, self._ends = starts[self._order], ends[self._order]
        everyone = np.arange(len(docs))
        self._lo = np.searchsorted(sorted_codes, everyone, side="left")
        self._hi = np.searchsorted(sorted_codes, everyone, side="right")
        self._doc_code = pd.Index(docs.to_pylist())
        self._ids = table.column("chunk_id")
        self._rows: dict[str, int] = {}
        self._spans: dict[str, tuple[int, int]] = {}

    def _span(self, doc_id: str) -> tuple[int, int]:
        """The document's rows in the sorted order, [lo, hi); kept per document asked about."""
        span = self._spans.get(doc_id)
        if span is None:
            try:
                code = self._doc_code.get_loc(doc_id)  # one hash lookup (get_indexer builds an Index a call)
                span = self._spans[doc_id] = (int(self._lo[code]), int(self._hi[code]))
            except KeyError:
                span = (0, 0)
        return span

    def _chunk(self, doc_id: str, k: int) -> Chunk:
        row = int(self._order[k])
        chunk_id = self._ids[row].as_py()
        self._rows[chunk_id] = row
        return Chunk(chunk_id, doc_id, int(self._starts[k]), int(self._ends[k]))

    def before(self, doc_id: str, start: int, end: int) -> Chunk | None:
        """The chunk that precedes [start, end) in its document (the last one starting earlier)."""
        lo, hi = self._span(doc_id)
        i = int(np.searchsorted(self._starts[lo:hi], start, side="left"))
        return self._chunk(doc_id, lo + i - 1) if i else None

    def after(self, doc_id: str, start: int, end: int) -> Chunk | None:
        """The chunk that follows [start, end): the first starting no earlier and ending later."""
        lo, hi = self._span(doc_id)
        for k in range(lo + int(np.searchsorted(self._starts[lo:hi], start, side="left")), hi):
            if self._ends[k] > end:
                return self._chunk(doc_id, k)
        return None

    def overlapping(self, doc_id: str, start: int, end: int) -> list[Chunk]:
        lo, hi = self._span(doc_id)
        last = lo + int(np.searchsorted(self._starts[lo:hi], end, side="left"))
        return [self._chunk(doc_id, k) for k in range(lo, last) if self._ends[k] > start]

    def row_of(self, chunk_id: str) -> int | None:
        """The table row of a chunk this layout returned."""
        return self._rows.get(chunk_id)
