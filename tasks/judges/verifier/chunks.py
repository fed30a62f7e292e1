"""Passages that are chunks of the corpus index, read from the analysis the index keeps.

The index build analyses every chunk's text once (tasks/core/text_analysis.py); a
retrieved chunk is the same text in every shard, every judge worker, the bulk decision and
the marks, so the verifier reads its words from those memory-mapped arrays instead of
tokenising it again. Any other passage (a window across chunk edges, a reference answer,
a text the index does not hold exactly) is tokenised as before: the arrays are what
`analyse` gives for the same text (tests/test_chunk_analysis.py), so verdicts, quotes and
marks are identical either way — this is speed only.

The judge says which index (`use_index`, from its JudgeRuntime: a path, set in this
process and in each worker process); a batch's passages are looked up at once (`prime`:
their hashes vectorised, the texts compared); `words_of` then answers per text. Shared by
the judge's threads: a lookup that misses (another index set meanwhile, the table
cleared) only means the text is tokenised, never that another index's row is read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from ragspan.tasks.core.text_analysis import ChunkAnalyses, Words

# Texts remembered (their rows, or that they are no chunk); past it the tables start again.
# They hold the texts alive: ~16k texts (~10-25 MB), about one batch of a shard's passages —
# a passage is looked up again in a later batch at ~5 µs, so more buys little.
_MAX_KNOWN = 1 << 14
_lock = threading.Lock()
_index: ChunkAnalyses | None = None
_known: dict[str, tuple[ChunkAnalyses, int]] = {}  # text -> (the analyses holding it, its row)
_asked: set[str] = set()  # texts looked up and not found in `_index`


@lru_cache(maxsize=2)
def _analyses(index_dir: str) -> ChunkAnalyses | None:
    try:
        return ChunkAnalyses(Path(index_dir))
    except (OSError, KeyError, ValueError):  # an index without analyses (another format): tokenise
        return None


def use_index(index_dir: str | None) -> None:
    """Read chunks from this index's analyses from now on (None: tokenise every passage)."""
    global _index
    found = _analyses(index_dir) if index_dir else None
    with _lock:
        if found is not _index:
            _index = found
            _known.clear()
            _asked.clear()


def prime(texts: Iterable[str]) -> None:
    """Look these passages up in the index at once (those not looked up before)."""
    index = _index
    if index is None:
        return
    new = list({t: None for t in texts if t not in _known and t not in _asked})
    if not new:
        return
    rows = index.rows_of(new).tolist()
    with _lock:
        if len(_known) + len(_asked) + len(new) > _MAX_KNOWN:
            _known.clear()
            _asked.clear()
        for text, row in zip(new, rows):
            if row >= 0:
                _known[text] = (index, row)
            else:
                _asked.add(text)


def words_of(text: str) -> Words | None:
    """The stored words of a passage primed and found in the index, else None."""
    found = _known.get(text)
    return found[0].words(found[1]) if found is not None else None
