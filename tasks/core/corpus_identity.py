"""Identity per document: one content hash per document, computed vectorised, and the
corpus snapshot's identity made from them (docs/decisions.md #55).

A document's hash covers its text and its chunk rows (ids and places): whatever of the
corpus a step reads through one document — its chunks' texts, the text between them that
chunk windows join across, which chunk a window starts from — changes the hash, and
nothing else does. A rebuild's difference (documents added, removed, edited, re-chunked)
is the set of doc_ids whose hash differs (`changed_documents`); it drives what is done
again: the corpus index's rows (tasks/steps/corpus_search.py), the answers kept whole
(tasks/reuse/answer_store.py).

Hashes are 64-bit (pandas' vectorised SipHash over whole columns). Change detection
compares a doc_id's hash with its own previous value, so an edit goes unseen only with
probability 2**-64 per edited document; chunk texts keyed by hash across the corpus
collide with probability about n**2 / 2**65 (3e-8 at 1M distinct chunk texts).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pandas as pd

IDENTITY_VERSION = "doc-identity-1"  # bump when what a document hash covers changes
_TEXT_KEY = "ragspan-text-01!"  # pandas' hash_key: exactly 16 characters
_ROW_COLUMNS = ("doc_id", "chunk_id", "char_start", "char_end")
_HASH_SLICE = 16_384  # texts hashed at a time
_ROW_SLICE = 1 << 20  # chunk rows hashed at a time


def text_hashes(texts: Sequence[str] | np.ndarray | pd.Series) -> np.ndarray:
    """One uint64 per text (SipHash of its UTF-8), in order; vectorised in C. A slice at a
    time: a corpus's texts are never all Python strings (and their UTF-8 copies) at once."""
    if len(texts) <= _HASH_SLICE:
        return _hashed(texts)
    rows = texts.iloc if isinstance(texts, pd.Series) else texts
    return np.concatenate([_hashed(rows[i:i + _HASH_SLICE]) for i in range(0, len(texts), _HASH_SLICE)])


def _hashed(texts: Sequence[str] | np.ndarray | pd.Series) -> np.ndarray:
    values = np.asarray(texts.tolist() if isinstance(texts, pd.Series) else texts, dtype=object)
    return pd.util.hash_array(values, encoding="utf-8", hash_key=_TEXT_KEY, categorize=False)


def chunk_row_hashes(chunks: pd.DataFrame) -> np.ndarray:
    """One uint64 per chunk row over (doc_id, chunk_id, char_start, char_end), in order. A
    slice of rows at a time: hashing an Arrow string column makes its values Python
    strings first (~1.3 GB for 10M chunk rows at once)."""
    rows = chunks[list(_ROW_COLUMNS)]
    if len(rows) <= _ROW_SLICE:
        return pd.util.hash_pandas_object(rows, index=False).to_numpy()
    return np.concatenate([pd.util.hash_pandas_object(rows.iloc[i:i + _ROW_SLICE], index=False).to_numpy()
                           for i in range(0, len(rows), _ROW_SLICE)])


def document_hashes(chunks: pd.DataFrame, doc_ids: Sequence[str] | pd.Series,
                    doc_text_hashes: np.ndarray) -> pd.Series:
    """doc_id → uint64 over the document's text hash and its chunk rows, sorted by doc_id.
    `doc_text_hashes[i]` is the text hash (text_hashes) of `doc_ids[i]`. A chunk row's
    order does not matter (a sum modulo 2**64); its id and place do."""
    codes, docs = pd.factorize(chunks["doc_id"])
    sums = np.zeros(len(docs), dtype=np.uint64)
    np.add.at(sums, codes, chunk_row_hashes(chunks))
    ids = pd.Index(np.asarray(list(doc_ids), dtype=object))
    per_doc = pd.DataFrame({"text": np.asarray(doc_text_hashes, dtype=np.uint64),
                            "chunks": pd.Series(sums, index=docs).reindex(ids, fill_value=0)
                            .to_numpy(dtype=np.uint64)})
    return pd.Series(pd.util.hash_pandas_object(per_doc, index=False).to_numpy(), index=ids).sort_index()


def corpus_document_hashes(chunks: pd.DataFrame, corpus: pd.DataFrame,
                           doc_text_hashes: np.ndarray | None = None) -> pd.Series:
    """document_hashes of a corpus table (doc_id, text); its texts hashed now unless
    `doc_text_hashes` (one per corpus row, as the loader keeps them) is given."""
    hashes = text_hashes(corpus["text"]) if doc_text_hashes is None else doc_text_hashes
    return document_hashes(chunks, corpus["doc_id"].tolist(), hashes)


def snapshot_digest(version: str, chunks: pd.DataFrame, documents: pd.Series) -> str:
    """The snapshot's identity: `version`, every chunk row in order (an index's rows follow
    the chunk table's order) and every document's hash. 24 hex characters."""
    h = hashlib.sha256(version.encode())
    h.update(chunk_row_hashes(chunks).tobytes())
    h.update("\x00".join(documents.index).encode("utf-8", "surrogatepass"))
    h.update(documents.to_numpy(dtype=np.uint64).tobytes())
    return h.hexdigest()[:24]


def changed_documents(before: pd.Series, after: pd.Series) -> tuple[set[str], set[str], set[str]]:
    """(added, removed, changed) doc_ids between two document_hashes."""
    common = before.index.intersection(after.index)
    changed = common[before.reindex(common).to_numpy() != after.reindex(common).to_numpy()]
    return (set(after.index.difference(before.index)), set(before.index.difference(after.index)),
            set(changed))
