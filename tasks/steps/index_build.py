"""index_build: the corpus index's files written, from the previous index where it can.

An index (tasks/steps/corpus_search.py searches it) is two things in one store entry:
`chunks.arrow`, one row per chunk in the chunk table's order (its place, its text, the
text between it and its neighbours, its document's hash, its text's hash and the terms
BM25 indexed), and a tantivy index whose documents are those rows' `terms`, in that order.

A corpus change used to rebuild both whole: at 1M chunks ~87 s, of which ~34 s tokenising
every chunk. Now the previous index (the most recently used whole one of the same store;
a damaged one is moved aside, never read) gives every row of a document whose hash is
unchanged (the hash covers the text and the chunk rows, tasks/core/corpus_identity.py: the
rows are identical by construction), and the terms of any chunk text it already held (by
text hash, the texts compared); only texts never seen are tokenised. tantivy is written
anew from the `terms` column in row order — its BM25 statistics then count exactly the
rows of this snapshot, as a fresh build's do (tantivy-py has no merge, and deleted
documents would linger in doc_freq and the token count: docs/decisions.md #57).

Memory: rows are made `BATCH_ROWS` at a time — the batch's document texts read from the
corpus (`texts_of`), its rows written to `chunks.arrow` as one record batch and to
tantivy — so no step holds every chunk text as Python strings. A cold build tokenises in
`TOKENISE_WORKERS` spawned processes when there is enough to tokenise.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import tantivy
from ragspan.tasks.core.arrow_rows import BatchedRows
from ragspan.tasks.core.chunk_split import MAX_GAP
from ragspan.tasks.core.corpus_identity import text_hashes
from ragspan.tasks.core.text import content_norms
from ragspan.tasks.state import (
    DirStore,
    mapped_buffer,
    release_free_heap,
    release_mapped_pages,
    spawn_pool,
)

INDEX_FORMAT = "tantivy-5"  # bump when the tokenisation or the files change (3: sums.json; 4: gaps; 5: hashes, terms)
CHUNKS_FILE = "chunks.arrow"  # the indexed chunks, row = tantivy's `row` field
_WRITER_HEAP = 256_000_000  # one writer thread: one segment up to ~1M chunks, stable doc order
BATCH_ROWS = 32_768  # rows made, written and indexed at a time
TOKENISE_WORKERS = 2
POOL_MIN_TEXTS = 150_000  # fewer texts to tokenise: spawning workers (~2 s of imports each) does not pay
_IN_FLIGHT = 3  # batches prepared ahead of the one being written (their texts in memory)

ROW_SCHEMA = pa.schema([
    ("chunk_id", pa.string()), ("doc_id", pa.string()), ("char_start", pa.int64()), ("char_end", pa.int64()),
    ("text", pa.string()), ("gap_before", pa.string()), ("gap_after", pa.string()),
    ("doc_hash", pa.uint64()), ("text_hash", pa.uint64()), ("terms", pa.large_string()),
])


def index_terms(text: str) -> list[str]:
    """The terms BM25 sees: the judge's own content-word norms (stems, numbers)."""
    return content_norms(text)


def joined_terms(texts: list[str]) -> list[str]:
    """Each text's index_terms as the body tantivy's whitespace tokenizer reads. Run in the
    tokenising workers too (a module-level function: spawn-safe)."""
    return [" ".join(index_terms(t)) for t in texts]


def texts_of(corpus: pd.DataFrame, positions: np.ndarray) -> list[str]:
    """The texts of the corpus rows at `positions`: the one place the build reads texts."""
    return corpus["text"].iloc[positions].tolist()


def check_format(index_dir: Path) -> str | None:
    """None when info.json says this code's format; else what is wrong."""
    try:
        info = json.loads((index_dir / "info.json").read_text())
    except (OSError, ValueError):
        return "info.json unreadable"
    if info.get("format") != INDEX_FORMAT:
        return f"format {info.get('format')!r}, not {INDEX_FORMAT!r}"
    return None


def tantivy_schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_integer_field("row", stored=False, fast=True)  # the chunk's row in CHUNKS_FILE
    sb.add_text_field("body", tokenizer_name="whitespace", index_option="freq")
    return sb.build()


# -- what a build did ------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexBuild:
    """An index and how it came about: `built` False when it was there already."""

    path: Path
    built: bool
    previous: Path | None = None  # the index rows were taken from
    rows: int = 0
    kept: int = 0  # rows taken whole from `previous` (documents unchanged)
    looked_up: int = 0  # rows made anew whose terms `previous` held (the same text)
    tokenised: int = 0  # rows whose text was tokenised


# -- the rows' plan: integers only -----------------------------------------------------------------


@dataclass(frozen=True)
class RowPlan:
    """Per row of the new chunk table: where its document's text is (a corpus row), its
    document's hash, its gaps' ranges in that text, and the previous index's row it is
    (-1: made anew)."""

    chunk_id: np.ndarray  # object
    doc_id: np.ndarray  # object
    start: np.ndarray
    end: np.ndarray
    doc_pos: np.ndarray
    doc_hash: np.ndarray  # uint64
    before: tuple[np.ndarray, np.ndarray]  # gap_before's [lo, hi) in the document text
    after: tuple[np.ndarray, np.ndarray]
    previous_row: np.ndarray


def gap_ranges(doc_codes: np.ndarray, starts: np.ndarray, ends: np.ndarray
               ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """(before, after): per row, the [lo, hi) range of its document's text between it and
    the chunk before / after it — chunk_split.gaps_between for every document at once:
    chunks ordered by (start, end) in their document (ties: table order), the gap measured
    from the furthest end so far; empty (lo == hi) where they touch or overlap and at the
    document's ends."""
    n = len(starts)
    order = np.lexsort((ends, starts, doc_codes))
    d, s, e = doc_codes[order], starts[order], ends[order]
    reach = pd.Series(e).groupby(d).cummax().to_numpy()
    first = np.r_[True, d[1:] != d[:-1]] if n else np.zeros(0, bool)
    lo = np.r_[0, reach[:-1]] if n else np.zeros(0, np.int64)
    lo = np.where(first, s, lo)
    hi = np.maximum(s, lo)
    last = np.r_[first[1:], True] if n else np.zeros(0, bool)
    after_lo = np.where(last, 0, np.r_[lo[1:], 0]) if n else lo
    after_hi = np.where(last, 0, np.r_[hi[1:], 0]) if n else hi
    return (_unsorted(order, lo), _unsorted(order, hi)), (_unsorted(order, after_lo), _unsorted(order, after_hi))


def _unsorted(order: np.ndarray, sorted_values: np.ndarray) -> np.ndarray:
    out = np.empty_like(sorted_values)
    out[order] = sorted_values
    return out


def row_plan(chunks: pd.DataFrame, corpus: pd.DataFrame, doc_hashes: pd.Series, previous: pa.Table | None) -> RowPlan:
    """The plan of the new index's rows (see RowPlan); `previous`: the previous index's
    chunks.arrow (memory-mapped), or None."""
    codes, docs = pd.factorize(chunks["doc_id"])
    doc_pos = pd.Index(corpus["doc_id"]).get_indexer(docs)[codes]
    doc_hash = doc_hashes.reindex(docs).to_numpy(dtype=np.uint64)[codes]
    chunk_id = chunks["chunk_id"].to_numpy(dtype=object)
    doc_id = chunks["doc_id"].to_numpy(dtype=object)
    start = chunks["char_start"].to_numpy(dtype=np.int64)
    end = chunks["char_end"].to_numpy(dtype=np.int64)
    before, after = gap_ranges(codes, start, end)
    return RowPlan(chunk_id, doc_id, start, end, doc_pos, doc_hash, before, after,
                   _previous_rows(chunk_id, doc_id, start, end, doc_hash, previous))


def _previous_rows(chunk_id: np.ndarray, doc_id: np.ndarray, start: np.ndarray, end: np.ndarray,
                   doc_hash: np.ndarray, previous: pa.Table | None) -> np.ndarray:
    """Per new row, the previous index's row of the same chunk id whose document hash (and
    place) is the same — the same row whole — else -1. Chunk ids are unique (schemas.Chunks)."""
    if previous is None or previous.num_rows == 0:
        return np.full(len(chunk_id), -1, dtype=np.int64)
    rows = pd.Index(previous.column("chunk_id").to_numpy(zero_copy_only=False)).get_indexer(chunk_id)
    found = np.flatnonzero(rows >= 0)
    at = rows[found]

    def column(name: str) -> np.ndarray:
        return previous.column(name).to_numpy(zero_copy_only=False)[at]

    same = (column("doc_hash") == doc_hash[found]) & (column("doc_id") == doc_id[found]) \
        & (column("char_start") == start[found]) & (column("char_end") == end[found])
    out = np.full(len(chunk_id), -1, dtype=np.int64)
    out[found[same]] = rows[found[same]]
    return out





# -- rows made anew --------------------------------------------------------------------------------


class KnownTerms:
    """The previous index's terms by chunk text: text hash → its first row, the texts
    compared before a row's terms are reused (a 64-bit collision is never trusted)."""

    def __init__(self, previous: BatchedRows | None):
        self._previous = previous
        self._index: pd.Index | None = None
        self._rows = np.zeros(0, dtype=np.int64)

    def rows_of(self, hashes: np.ndarray, texts: list[str]) -> np.ndarray:
        """Per text, a previous row holding that very text, else -1."""
        if self._previous is None or self._previous.table.num_rows == 0 or not len(hashes):
            return np.full(len(hashes), -1, dtype=np.int64)
        if self._index is None:
            all_hashes = self._previous.table.column("text_hash").to_numpy()
            first = ~pd.Index(all_hashes).duplicated()
            self._index, self._rows = pd.Index(all_hashes[first]), np.flatnonzero(first)
        at = self._index.get_indexer(hashes)
        rows = np.where(at >= 0, self._rows[np.maximum(at, 0)], -1)
        found = np.flatnonzero(rows >= 0)
        held = self._previous.take(rows[found], ["text"]).column("text").to_pylist()
        rows[found[[h != texts[i] for h, i in zip(held, found)]]] = -1
        return rows

    def terms(self, rows: np.ndarray) -> list[str]:
        return self._previous.take(rows, ["terms"]).column("terms").to_pylist() if len(rows) else []


@dataclass
class _Batch:
    """One batch of rows [lo, hi): the kept rows' previous rows, the new rows' values, and
    the texts whose terms are being made (`pending`, a future)."""

    lo: int
    hi: int
    kept: np.ndarray  # positions in the batch taken from the previous index
    previous_rows: np.ndarray
    new: np.ndarray  # positions in the batch made anew
    columns: dict[str, list]  # the new rows' text, gap_before, gap_after
    text_hash: np.ndarray
    known_rows: np.ndarray  # per new row: a previous row with its terms, or -1
    pending: Future


def _new_columns(plan: RowPlan, rows: np.ndarray, corpus: pd.DataFrame) -> dict[str, list]:
    """text, gap_before, gap_after of these rows, from their documents' texts (read once each)."""
    positions = np.unique(plan.doc_pos[rows])
    text_at = dict(zip(positions.tolist(), texts_of(corpus, positions)))
    docs = [text_at[p] for p in plan.doc_pos[rows].tolist()]
    return {
        "text": [t[s:e] for t, s, e in zip(docs, plan.start[rows].tolist(), plan.end[rows].tolist())],
        "gap_before": _gaps(docs, plan.before, rows),
        "gap_after": _gaps(docs, plan.after, rows),
    }


def _gaps(docs: list[str], ranges: tuple[np.ndarray, np.ndarray], rows: np.ndarray) -> list[str | None]:
    """The gap texts; None where the stretch is longer than MAX_GAP (not kept: gaps_between).
    hi - lo is the gap's length: chunks lie inside their documents (the loader checks)."""
    return [None if hi - lo > MAX_GAP else t[lo:hi]
            for t, lo, hi in zip(docs, ranges[0][rows].tolist(), ranges[1][rows].tolist())]


def _prepared(plan: RowPlan, lo: int, hi: int, corpus: pd.DataFrame, known: KnownTerms,
              tokenise: Callable[[list[str]], Future]) -> _Batch:
    """Rows [lo, hi) made ready: the new rows' texts and gaps sliced, their terms looked up,
    the rest sent to be tokenised."""
    prev = plan.previous_row[lo:hi]
    kept, new = np.flatnonzero(prev >= 0), np.flatnonzero(prev < 0)
    columns = _new_columns(plan, new + lo, corpus)
    hashes = text_hashes(columns["text"]) if len(new) else np.zeros(0, dtype=np.uint64)
    known_rows = known.rows_of(hashes, columns["text"])
    unknown = [columns["text"][i] for i in np.flatnonzero(known_rows < 0)]
    return _Batch(lo, hi, kept, prev[kept], new, columns, hashes, known_rows, tokenise(unknown))


def _batch_table(plan: RowPlan, batch: _Batch, previous: BatchedRows | None, known: KnownTerms) -> pa.Table:
    """The batch's rows in table order: kept rows taken from the previous index, new ones
    made, interleaved back into place."""
    rows = batch.new + batch.lo
    terms = np.empty(len(rows), dtype=object)
    looked_up = np.flatnonzero(batch.known_rows >= 0)
    terms[looked_up] = known.terms(batch.known_rows[looked_up])
    terms[np.flatnonzero(batch.known_rows < 0)] = _terms(batch)
    made = pa.table({
        "chunk_id": plan.chunk_id[rows], "doc_id": plan.doc_id[rows], "char_start": plan.start[rows],
        "char_end": plan.end[rows], **batch.columns, "doc_hash": plan.doc_hash[rows],
        "text_hash": batch.text_hash, "terms": terms.tolist(),
    }, schema=ROW_SCHEMA)
    if not len(batch.kept):
        return made
    taken = previous.take(batch.previous_rows, ROW_SCHEMA.names)
    place = np.empty(batch.hi - batch.lo, dtype=np.int64)
    place[batch.kept] = np.arange(len(batch.kept))
    place[batch.new] = len(batch.kept) + np.arange(len(batch.new))
    return pa.concat_tables([taken, made]).take(pa.array(place))


# -- tokenising: here, or in worker processes --------------------------------------------------------


def _done(texts: list[str]) -> Future:
    """The texts' joined_terms made here, as a finished future."""
    f: Future = Future()
    f.set_result(joined_terms(texts))
    return f


@contextmanager
def _tokeniser(texts_to_tokenise: int) -> Iterator[Callable[[list[str]], Future]]:
    """texts → a future of their joined_terms: in TOKENISE_WORKERS spawned processes when
    there are POOL_MIN_TEXTS or more (a cold build), else here. Spawn, not fork: the caller
    may run Prefect's threads (as tasks/judges/local.py starts its workers)."""
    if texts_to_tokenise < POOL_MIN_TEXTS or (os.cpu_count() or 1) < 2:
        yield _done
        return
    pool = spawn_pool(TOKENISE_WORKERS)
    try:
        yield lambda texts: _pooled(pool, texts)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _pooled(pool: Executor, texts: list[str]) -> Future:
    try:
        return pool.submit(joined_terms, texts) if texts else _done(texts)
    except (BrokenProcessPool, RuntimeError):  # the workers cannot start: tokenise here
        return _done(texts)


def _terms(batch: _Batch) -> list[str]:
    """The terms of the batch's texts nobody held; a worker that died: made here instead."""
    try:
        return batch.pending.result()
    except (BrokenProcessPool, OSError):
        return joined_terms([batch.columns["text"][i] for i in np.flatnonzero(batch.known_rows < 0)])


# -- the build -------------------------------------------------------------------------------------


def rows_to_tokenise(plan: RowPlan) -> int:
    """An upper bound: the rows made anew (some find their terms in the previous index)."""
    return int((plan.previous_row < 0).sum())


def write_index(tmp: Path, plan: RowPlan, corpus: pd.DataFrame, previous: BatchedRows | None
                ) -> tuple[int, int, int]:
    """The index's files into `tmp` (renamed into place by the store), batch by batch;
    (kept, looked up, tokenised) rows."""
    (tmp / "tantivy").mkdir()
    index = tantivy.Index(tantivy_schema(), path=str(tmp / "tantivy"))
    writer = index.writer(_WRITER_HEAP, 1)
    known = KnownTerms(previous)
    counts = np.zeros(3, dtype=np.int64)
    n = len(plan.start)
    # Arrow IPC, uncompressed: memory-mapped by every search process, which reads only the
    # rows of its hits; and by the next build, which takes its unchanged rows.
    with _tokeniser(rows_to_tokenise(plan)) as tokenise, pa.ipc.new_file(str(tmp / CHUNKS_FILE), ROW_SCHEMA) as out:
        ahead: deque[_Batch] = deque()  # prepared, their terms being made meanwhile
        for lo in range(0, n, BATCH_ROWS):
            ahead.append(_prepared(plan, lo, min(lo + BATCH_ROWS, n), corpus, known, tokenise))
            if len(ahead) > _IN_FLIGHT:
                counts += _write_batch(ahead.popleft(), plan, previous, known, out, writer)
                release_mapped_pages()  # the texts and previous rows read so far: not kept resident
        while ahead:
            counts += _write_batch(ahead.popleft(), plan, previous, known, out, writer)
    release_mapped_pages()
    release_free_heap()  # the batches' texts and terms: gone, but resident until handed back
    writer.commit()
    writer.wait_merging_threads()
    (tmp / "info.json").write_text(json.dumps({"format": INDEX_FORMAT, "chunks": n}))
    # sealed by the store: every file's size and md5, checked whenever the index is opened
    return int(counts[0]), int(counts[1]), int(counts[2])


def _write_batch(batch: _Batch, plan: RowPlan, previous: BatchedRows | None, known: KnownTerms,
                 out: pa.ipc.RecordBatchFileWriter, writer: tantivy.IndexWriter) -> np.ndarray:
    """The batch's rows into chunks.arrow and tantivy (row = its place in the file);
    (kept, looked up, tokenised) rows."""
    table = _batch_table(plan, batch, previous, known)
    out.write_table(table)
    for row, body in enumerate(table.column("terms").to_pylist(), start=batch.lo):
        writer.add_document(tantivy.Document(row=row, body=body))
    looked_up = int((batch.known_rows >= 0).sum())
    return np.array([len(batch.kept), looked_up, len(batch.new) - looked_up])


def previous_index(store: DirStore, name: str) -> Path | None:
    """The most recently used whole index of the store other than `name`: an older format is
    passed over (not damage); a damaged one is moved aside, one warning line, never read."""
    for path in store.names_by_use():
        if path.name == name or not path.is_dir() or check_format(path) is not None:
            continue
        found = store.checked_dir(path.name, "not reused: the index is built without it", check_format, mark=False)
        if found is not None:
            return found
    return None


def read_rows(index_dir: Path) -> pa.Table:
    """An index's chunks.arrow, memory-mapped (zero-copy: its pages read on demand, and
    handed back by release_mapped_pages)."""
    return pa.ipc.open_file(pa.BufferReader(mapped_buffer(index_dir / CHUNKS_FILE))).read_all()


def build_in_store(store: DirStore, name: str, chunks: pd.DataFrame, corpus: pd.DataFrame,
                   doc_hashes: pd.Series) -> IndexBuild:
    """The index `name` of these tables, written aside, sealed and renamed by the store, its
    unchanged rows from the previous index. Another process may win the race: its index is
    identical, and kept."""
    previous_dir = previous_index(store, name)
    previous = BatchedRows(read_rows(previous_dir)) if previous_dir is not None else None
    plan = row_plan(chunks, corpus, doc_hashes, previous.table if previous else None)
    counts: list[int] = []
    path = store.write_dir(name, lambda tmp: counts.extend(write_index(tmp, plan, corpus, previous)), replace=False)
    kept, looked_up, tokenised = counts or (0, 0, 0)
    return IndexBuild(path, True, previous_dir, len(plan.start), kept, looked_up, tokenised)
