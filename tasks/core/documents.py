"""A corpus table's texts by doc_id, read one document at a time.

The corpus's texts are memory-mapped from the corpus store (tasks/inputs/load/corpus_store.py);
a dict of every text would make them all Python strings at once (about a gigabyte of heap
at 1M chunks). `DocumentTexts` reads a text when it is asked for, keeping the last few.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import lru_cache

import numpy as np
import pandas as pd
import pyarrow as pa
from ragspan.tasks.core.among import among
from ragspan.tasks.state import release_mapped_pages

_KEPT = 512  # texts kept as Python strings: rows are mostly grouped by document
_SLICE = 4096  # texts read between two hand-backs of mapped pages (texts_by_id)


def texts_by_id(corpus: pd.DataFrame, doc_ids: set[str]) -> dict[str, str]:
    """doc_id → text of just these documents, read a slice at a time with the mapped pages
    each slice faulted in handed back (tasks/state/_mapped.py): reading 100k documents
    scattered over a 5 GB store at once mapped most of it into this process."""
    positions = np.flatnonzero(among(corpus["doc_id"], doc_ids).to_numpy())
    ids, texts = corpus["doc_id"], corpus["text"]
    out: dict[str, str] = {}
    for lo in range(0, len(positions), _SLICE):
        part = positions[lo:lo + _SLICE]
        out.update(zip(ids.iloc[part].tolist(), texts.iloc[part].tolist()))  # lists: Arrow strings iterate slowly
        release_mapped_pages()
    return out


class DocumentTexts(Mapping[str, str]):
    """doc_id → text of `corpus` (doc_id, text), read at first use."""

    def __init__(self, corpus: pd.DataFrame) -> None:
        self._ids = pd.Index(corpus["doc_id"])
        texts = corpus["text"]
        column = getattr(texts.array, "__arrow_array__", None)  # an Arrow-backed column: its array, no copy
        read = texts.iloc.__getitem__ if column is None else _arrow_reader(column())
        self._reads = 0

        def text_at(pos: int) -> str:
            self._reads += 1
            if self._reads % _KEPT == 0:
                # A read of a mapped text faults in its neighbours' pages too (the kernel
                # maps ~64 KB around a fault): reading documents scattered over a 5 GB store
                # would keep most of it in this process's RSS (tasks/state/_mapped.py).
                release_mapped_pages()
            return read(pos)

        self._text_at = lru_cache(maxsize=_KEPT)(text_at)

    def __getitem__(self, doc_id: str) -> str:
        pos = self._ids.get_loc(doc_id)  # KeyError when absent, as a dict
        if not isinstance(pos, int):  # a repeated doc_id: never in a validated corpus
            raise KeyError(doc_id)
        return self._text_at(pos)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._ids

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)


def _arrow_reader(column: pa.ChunkedArray | pa.Array):
    """Position → text of an Arrow string column: ~1.7 µs a read, where pandas' `.iloc` on
    the same column takes ~5.8 (the flow reads ~10⁵ texts a run through DocumentTexts)."""
    return lambda pos: column[pos].as_py()
