"""A corpus table's texts by doc_id, read one document at a time.

The corpus's texts are memory-mapped from the corpus store (tasks/io/load/corpus_store.py);
a dict of every text would make them all Python strings at once (about a gigabyte of heap
at 1M chunks). `DocumentTexts` reads a text when it is asked for, keeping the last few.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import lru_cache

import pandas as pd

_KEPT = 512  # texts kept as Python strings: rows are mostly grouped by document


class DocumentTexts(Mapping[str, str]):
    """doc_id → text of `corpus` (doc_id, text), read at first use."""

    def __init__(self, corpus: pd.DataFrame) -> None:
        self._ids = pd.Index(corpus["doc_id"])
        texts = corpus["text"]
        self._text_at = lru_cache(maxsize=_KEPT)(lambda pos: texts.iloc[pos])

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
