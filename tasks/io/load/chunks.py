"""Chunks: read and checked against the corpus, or cut by ragspan (size/overlap in params.yaml)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
from ragspan.tasks.core.schemas import Chunks
from ragspan.tasks.errors import InputError
from ragspan.tasks.io.load.corpus import _relpath
from ragspan.tasks.io.load.files import _LAST_WS, _read_with_hash, find_table
from ragspan.tasks.io.load.problems import (
    _ints,
    _is_missing,
    _Problems,
    _require_columns,
    _strings,
    _strip_index,
    _unique,
    _validate_schema,
)

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
    cid, did, starts, ends = [], [], [], []
    half = size // 2
    for doc_id, text in _documents(corpus):
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
    return pd.DataFrame(
        {
            "chunk_id": pd.Series(cid, dtype="str"),
            "doc_id": pd.Series(did, dtype="str"),
            "char_start": pd.Series(starts, dtype="int64"),
            "char_end": pd.Series(ends, dtype="int64"),
        }
    )


def _documents(corpus: pd.DataFrame, batch: int = 4096) -> Iterator[tuple[str, str]]:
    """(doc_id, text) in corpus order, a batch of texts at a time as Python strings: the
    corpus is memory-mapped (tasks/io/load/corpus_store.py), never held whole."""
    for start in range(0, len(corpus), batch):
        part = corpus.iloc[start : start + batch]
        yield from zip(part["doc_id"].tolist(), part["text"].tolist())


def load_chunks(data_dir: Path, corpus: pd.DataFrame, size: int, overlap: int) -> pd.DataFrame:
    """chunks.* validated against the corpus, or ragspan's own chunking when absent.

    An optional `text` column is checked against the document and dropped; any other
    extra column is dropped (chunks are exactly chunk_id, doc_id, char_start, char_end).
    """
    return _load_chunks(Path(data_dir), corpus, size, overlap)[0]


def _load_chunks(
    data_dir: Path, corpus: pd.DataFrame, size: int, overlap: int
) -> tuple[pd.DataFrame, dict[str, str]]:
    path = find_table(data_dir, "chunks", required=False)
    if path is None:
        return chunk_corpus(corpus, size, overlap), {}
    df, digest = _read_with_hash(path)
    _require_columns(path, df, ("chunk_id", "doc_id", "char_start", "char_end"))
    if not len(df):
        raise InputError(
            path, None, None, "no chunks (delete the file to let ragspan chunk the corpus)"
        )
    df, rows = _strip_index(df)
    lenient = path.suffix.lower() == ".csv"
    # Lengths for the range checks; a text only for a row that gives its own (the corpus
    # is memory-mapped: tasks/io/load/corpus_store.py).
    doc_len = dict(zip(corpus["doc_id"].tolist(), corpus["text"].str.len().tolist()))
    doc_row = {d: i for i, d in enumerate(corpus["doc_id"].tolist())}
    texts_column = corpus["text"]

    probs = _Problems(path, rows, ("chunk_id", df["chunk_id"].tolist()))
    cids = _strings(df["chunk_id"].tolist(), "chunk_id", probs)
    dids = _strings(df["doc_id"].tolist(), "doc_id", probs)
    starts = _ints(df["char_start"].tolist(), "char_start", probs, lenient)
    ends = _ints(df["char_end"].tolist(), "char_end", probs, lenient)
    _unique(cids, "chunk_id", probs, rows)
    texts = df["text"].tolist() if "text" in df.columns else None

    unknown = range_bad = text_bad = False
    for pos, (d, s, e) in enumerate(zip(dids, starts, ends)):
        if d is None:
            continue
        n = doc_len.get(d)
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
                    probs.add(
                        pos, "char_end", f"char_end ({e}) must be greater than char_start ({s})"
                    )
                else:
                    field = "char_start" if s < 0 or s >= n else "char_end"
                    probs.add(
                        pos,
                        field,
                        f"offsets [{s}, {e}) out of range: document {d!r} has {n} characters",
                    )
            continue
        if texts is not None and not text_bad:
            t = texts[pos]
            if lenient and t == "":
                continue  # an empty CSV cell: no text given for this chunk
            if _is_missing(t):
                continue
            if t != texts_column.iloc[doc_row[d]][s:e]:
                text_bad = True
                probs.add(pos, "text", f"chunk text does not match the document at [{s}, {e})")
    probs.raise_first()

    out = pd.DataFrame(
        {
            "chunk_id": pd.Series(cids, dtype="str"),
            "doc_id": pd.Series(dids, dtype="str"),
            "char_start": pd.Series(starts, dtype="int64"),
            "char_end": pd.Series(ends, dtype="int64"),
        }
    )
    out = _validate_schema(Chunks, out, path, rows)
    return out, {_relpath(path, data_dir): digest}
