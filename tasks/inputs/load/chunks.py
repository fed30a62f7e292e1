"""Chunks: read and checked against the corpus, or cut by ragspan (size/overlap in params.yaml)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from ragspan.tasks.core.documents import DocumentTexts
from ragspan.tasks.core.schemas import Chunks
from ragspan.tasks.errors import InputError
from ragspan.tasks.inputs.load.batches import (
    BATCH_BYTES,
    Batch,
    jsonl_arrow_batches,
    raise_missing_columns,
    table_batches,
)
from ragspan.tasks.inputs.load.corpus import _relpath
from ragspan.tasks.inputs.load.files import _LAST_WS, find_table
from ragspan.tasks.inputs.load.problems import (
    _ints,
    _is_missing,
    _Problems,
    _strings,
    _unique,
    _validate_schema,
)
from ragspan.tasks.state import file_md5s

# --------------------------------------------------------------------------- chunks


def chunk_corpus(corpus: pd.DataFrame, size: int, overlap: int) -> pd.DataFrame:
    """Windows of about `size` characters sharing `overlap`, covering every character.

    A window that does not already end at a word boundary is cut just after the last
    whitespace in its second half, if any (never shorter than half a window, so
    chunks stay non-empty and the loop always advances).
    """
    if size <= 0 or not 0 <= overlap < size:
        raise ValueError(
            f"need size > 0 and 0 <= overlap < size, got size={size}, overlap={overlap}"
        )
    # Arrow arrays a batch of documents at a time: 10M chunks as Python lists would cost
    # ~1.5 GB of heap on the way to a table of ~0.4 GB.
    parts: list[pa.RecordBatch] = []
    for batch in _document_batches(corpus):
        parts.append(_windows(batch, size, overlap))
    table = pa.Table.from_batches(parts, schema=_SCHEMA)
    return table.to_pandas()


_SCHEMA = pa.schema([("chunk_id", pa.large_string()), ("doc_id", pa.large_string()),
                     ("char_start", pa.int64()), ("char_end", pa.int64())])


def _windows(documents: list[tuple[str, str]], size: int, overlap: int) -> pa.RecordBatch:
    """chunk_corpus's windows of these documents."""
    cid, did, starts, ends = [], [], [], []
    half = size // 2
    for doc_id, text in documents:
        n = len(text)
        start, i, prev_end = 0, 0, 0
        while True:
            end = min(start + size, n)
            if end < n and not (text[end - 1].isspace() or text[end].isspace()):
                m = _LAST_WS.match(text, start + half, end)
                # Only snap if the chunk still reaches past the previous one (else it
                # would be a useless chunk nested inside its predecessor).
                if m is not None and m.end() > max(start, prev_end):
                    end = m.end()
            cid.append(f"{doc_id}#{i}")
            did.append(doc_id)
            starts.append(start)
            ends.append(end)
            if end >= n:
                break
            start, prev_end = max(end - overlap, start + 1), end
            i += 1
    return pa.record_batch([pa.array(cid, pa.large_string()), pa.array(did, pa.large_string()),
                            pa.array(starts, pa.int64()), pa.array(ends, pa.int64())], schema=_SCHEMA)


def _document_batches(corpus: pd.DataFrame, batch: int = 4096) -> Iterator[list[tuple[str, str]]]:
    """(doc_id, text) in corpus order, a batch of texts at a time as Python strings: the
    corpus is memory-mapped (tasks/inputs/load/corpus_store.py), never held whole."""
    for start in range(0, len(corpus), batch):
        part = corpus.iloc[start : start + batch]
        yield list(zip(part["doc_id"].tolist(), part["text"].tolist()))


def load_chunks(data_dir: Path, corpus: pd.DataFrame, size: int, overlap: int) -> pd.DataFrame:
    """chunks.* validated against the corpus, or ragspan's own chunking when absent.

    An optional `text` column is checked against the document and dropped; any other
    extra column is dropped (chunks are exactly chunk_id, doc_id, char_start, char_end).
    """
    return _load_chunks(Path(data_dir), corpus, size, overlap)[0]


_COLUMNS = ("chunk_id", "doc_id", "char_start", "char_end")
# A chunk table of exactly these columns, as Arrow's JSON reader types them: read by it
# (tasks/inputs/load/batches.jsonl_arrow_batches) and checked vectorised (_ChunkChecks.arrow_batch).
_ARROW_SCHEMA = pa.schema([("chunk_id", pa.string()), ("doc_id", pa.string()),
                           ("char_start", pa.int64()), ("char_end", pa.int64())])
# An id holding one of these characters is not blank by Python's str.strip() (the
# per-record check); an id without one is checked the per-record way.
_SURELY_NOT_BLANK = "[0-9A-Za-z]"


def _load_chunks(
    data_dir: Path, corpus: pd.DataFrame, size: int, overlap: int, batch_bytes: int = BATCH_BYTES,
    doc_lengths: pd.Series | None = None, arrow_jsonl: bool = True,
) -> tuple[pd.DataFrame, dict[str, str]]:
    """`doc_lengths`: doc_id → text length, when known without reading the texts (the
    corpus store keeps them); else measured from `corpus`. `arrow_jsonl=False`: a JSONL
    table read by the strict per-record reader alone (what the Arrow path must equal)."""
    path = find_table(data_dir, "chunks", required=False)
    if path is None:
        return chunk_corpus(corpus, size, overlap), {}
    digest = file_md5s([path])[0]
    checks = _ChunkChecks(path, corpus, doc_lengths)
    batches = (jsonl_arrow_batches(path, batch_bytes, _ARROW_SCHEMA) if arrow_jsonl and path.suffix.lower() == ".jsonl"
               else table_batches(path, batch_bytes))
    columns: dict[str, None] = {}
    for i, batch in enumerate(batches):
        problems = checks.batch(batch)
        if problems.found or i == 0:
            raise_missing_columns(path, batch, columns, batches, _COLUMNS)
        if problems.found:
            checks.raise_earliest(problems)
    if not checks.count:
        raise InputError(path, None, None, "no chunks (delete the file to let ragspan chunk the corpus)")
    checks.raise_duplicate(None)
    out = pa.table({c: pa.chunked_array(parts, type=pa.large_string() if i < 2 else pa.int64())
                    for i, (c, parts) in enumerate(checks.parts.items())}).to_pandas()
    out = _validate_schema(Chunks, out, path, checks.rows)
    return out, {_relpath(path, data_dir): digest}


class _ChunkChecks:
    """A chunk table checked a batch at a time, as a whole-file read checks it: the first
    problem in file order wins. Within a batch every check keeps its first failure; a
    chunk_id repeated across batches is found over 64-bit hashes of every id read so far
    (`raise_duplicate`: ~80 MB at 10M chunks, not a set of every id as Python strings)."""

    def __init__(self, path: Path, corpus: pd.DataFrame, doc_lengths: pd.Series | None) -> None:
        self.path, self.lenient = path, path.suffix.lower() == ".csv"
        # Lengths for the range checks; a text only for a row that gives its own (the corpus
        # is memory-mapped: tasks/inputs/load/corpus_store.py).
        if doc_lengths is None:
            doc_lengths = pd.Series(corpus["text"].str.len().to_numpy(), index=corpus["doc_id"].tolist())
        self.doc_len = dict(zip(doc_lengths.index.tolist(), doc_lengths.tolist()))
        self._doc_index = pd.Index(doc_lengths.index)  # for the vectorised checks
        self._doc_lengths = doc_lengths.to_numpy(dtype=np.int64)
        self.texts = DocumentTexts(corpus)
        self.parts: dict[str, list[pa.Array]] = {c: [] for c in _COLUMNS}
        self.id_hashes: list[np.ndarray] = []
        self.row_parts: list[np.ndarray] = []
        self.failed: list | None = None
        self.count = 0

    @property
    def rows(self) -> np.ndarray:
        return np.concatenate(self.row_parts) if self.row_parts else np.array([], dtype=np.int64)

    def batch(self, batch: Batch) -> _Problems:
        """The batch's problems; its columns kept when it has none."""
        if batch.arrow is not None and self.arrow_batch(batch.arrow, batch.rows):
            return _Problems(self.path, batch.rows)
        col = lambda name: batch.columns.get(name, [None] * len(batch.rows))
        probs = _Problems(self.path, batch.rows, ("chunk_id", col("chunk_id")))
        cids = _strings(col("chunk_id"), "chunk_id", probs)
        dids = _strings(col("doc_id"), "doc_id", probs)
        starts = _ints(col("char_start"), "char_start", probs, self.lenient)
        ends = _ints(col("char_end"), "char_end", probs, self.lenient)
        _unique(cids, "chunk_id", probs, batch.rows)
        self._places(probs, dids, starts, ends, batch.columns.get("text"))
        self.id_hashes.append(pd.util.hash_array(np.asarray(cids, dtype=object), categorize=False))
        self.row_parts.append(np.asarray(batch.rows, dtype=np.int64))
        self.failed = cids if probs.found else None  # its ids, for raise_duplicate
        if not probs.found:
            for name, values in zip(_COLUMNS, (cids, dids, starts, ends)):
                self.parts[name].append(pa.array(values, type=pa.large_string() if name in _COLUMNS[:2] else pa.int64()))
            self.count += len(batch.rows)
        return probs

    def arrow_batch(self, table: pa.Table, rows: list[int]) -> bool:
        """Keep an Arrow-read batch (_ARROW_SCHEMA, no null) whose every row passes what
        `batch` checks per record — ids not blank, unique within the batch, known
        documents, 0 <= char_start < char_end <= the document's length — decided over
        whole columns; False (nothing kept) when any row may fail: the per-record checks
        then find and name it."""
        cids, dids = table.column("chunk_id"), table.column("doc_id")
        if not (pc.all(pc.match_substring_regex(cids, _SURELY_NOT_BLANK)).as_py()
                and pc.all(pc.match_substring_regex(dids, _SURELY_NOT_BLANK)).as_py()
                and pc.count_distinct(cids).as_py() == len(cids)):
            return False
        doc_at = self._doc_index.get_indexer(dids.to_numpy(zero_copy_only=False))
        if (doc_at < 0).any():
            return False
        starts, ends = table.column("char_start").to_numpy(), table.column("char_end").to_numpy()
        if not ((starts >= 0) & (starts < ends) & (ends <= self._doc_lengths[doc_at])).all():
            return False
        ids = cids.to_numpy(zero_copy_only=False)
        self.id_hashes.append(pd.util.hash_array(ids, categorize=False))  # as `batch` hashes them
        self.row_parts.append(np.asarray(rows, dtype=np.int64))
        self.failed = None
        for name in _COLUMNS:
            self.parts[name].append(table.column(name).chunk(0).cast(
                pa.large_string() if name in _COLUMNS[:2] else pa.int64()))
        self.count += len(rows)
        return True

    def _places(self, probs: _Problems, dids: list, starts: list, ends: list, texts: list | None) -> None:
        unknown = range_bad = text_bad = False
        for pos, (d, s, e) in enumerate(zip(dids, starts, ends)):
            if d is None:
                continue
            n = self.doc_len.get(d)
            if n is None:
                if not unknown:
                    unknown = True
                    probs.add(pos, "doc_id", f"unknown doc_id {d!r} (not in the corpus)")
                continue
            if s is None or e is None:
                continue
            if not 0 <= s < e <= n:
                if not range_bad:
                    range_bad = True
                    if s >= e and 0 <= s and e <= n:
                        probs.add(pos, "char_end", f"char_end ({e}) must be greater than char_start ({s})")
                    else:
                        field = "char_start" if s < 0 or s >= n else "char_end"
                        probs.add(pos, field, f"offsets [{s}, {e}) out of range: document {d!r} has {n} characters")
                continue
            if texts is not None and not text_bad:
                t = texts[pos]
                if (self.lenient and t == "") or _is_missing(t):
                    continue  # no text given for this chunk (an empty CSV cell, a null)
                if t != self.texts[d][s:e]:
                    text_bad = True
                    probs.add(pos, "text", f"chunk text does not match the document at [{s}, {e})")

    def raise_earliest(self, problems: _Problems) -> None:
        """The batch's first problem, unless a chunk_id repeated across batches comes first."""
        first_problem = min(problems.found)[0] + self.count
        self.raise_duplicate(first_problem)
        problems.raise_first()

    def raise_duplicate(self, before: int | None) -> None:
        """InputError for the first chunk_id (in file order, before position `before`) that
        an earlier row already has."""
        hashes = np.concatenate(self.id_hashes) if self.id_hashes else np.array([], dtype=np.uint64)
        order = np.argsort(hashes, kind="stable")
        same = hashes[order][1:] == hashes[order][:-1]
        if not same.any():
            return
        read = [p.to_pylist() for p in self.parts["chunk_id"]] + ([self.failed] if self.failed is not None else [])
        ids = np.asarray([i for part in read for i in part], dtype=object)
        for pos in sorted(int(p) for p in order[1:][same]):
            if before is not None and pos >= before:
                return
            firsts = np.flatnonzero(ids[:pos] == ids[pos]) if ids[pos] is not None else []
            if len(firsts):
                rows = self.rows
                raise InputError(self.path, int(rows[pos]), "chunk_id",
                                 f"duplicate chunk_id {ids[pos]!r} (first at row {int(rows[firsts[0]])})")


