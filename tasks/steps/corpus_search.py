"""corpus_search: claims that nothing retrieved supports → candidate chunks corpus-wide.

A BM25 index (tantivy, on disk and memory-mapped: ragspan's own terms through tantivy's
whitespace tokenizer, so the index sees exactly the judge's content-word norms) over
every chunk, built once per corpus snapshot — its directory is named by the content
hash of the chunk table — and reused by every run and process. The judge is called
only on the top_k hits per claim, never once per corpus chunk.

tantivy replaced bm25s (BENCHMARKS.md, "The corpus-wide index": same recall on the same terms;
at 100k chunks 8x faster to build and ~17x faster to query, half the memory). Its
search releases the GIL, so shards searching side by side use both cores.

Store: `<state>/index/<hash>/`, the store layer's directory store `indexes`
(tasks/state/_store.py): built aside, sealed, renamed into place; checked whenever it is
opened (a damaged index is moved aside and built again); no room is DiskFull.

Building (tasks/steps/index_build.py): a new snapshot's index takes the rows of every
document whose hash is unchanged from the most recently used whole index, looks up the
terms of chunk texts it already held, tokenises only the rest, and writes tantivy anew
from the rows' terms — the same files a fresh build writes (docs/decisions.md #57).
`index_build` says what it did (rows kept, looked up, tokenised).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd
import pyarrow as pa
import tantivy
from prefect import task
from prefect.cache_policies import NO_CACHE
from ragspan.tasks.core import schemas
from ragspan.tasks.core.among import among
from ragspan.tasks.core.arrow_rows import BatchedRows
from ragspan.tasks.core.corpus_identity import corpus_document_hashes, snapshot_digest
from ragspan.tasks.inputs.validated_cache import kept_with_inputs
from ragspan.tasks.state import dir_store, release_mapped_pages
from ragspan.tasks.steps.cache_policy import step_task
from ragspan.tasks.steps.index_build import (  # noqa: F401 — CHUNKS_FILE, index_terms: this module's API too
    CHUNKS_FILE,
    INDEX_FORMAT,
    IndexBuild,
    build_in_store,
    check_format,
    index_terms,
    read_rows,
)


def chunk_table_hash(chunks: pd.DataFrame, corpus: pd.DataFrame) -> str:
    """The index's identity: every chunk row in order and every document's hash (its text
    and chunk rows, tasks/core/corpus_identity.py). Whole texts, not only the chunks' own:
    the index also keeps the text between a chunk and its neighbours (`with_gaps`), which
    an edit between chunks changes alone."""
    return snapshot_digest(INDEX_FORMAT, chunks, corpus_document_hashes(chunks, corpus))


class ChunkSource(Protocol):
    """What an index is built from: a validated workspace (tasks/inputs/load), whose tables may
    be read only at first use — an unchanged re-run, whose index's name is known, never
    reads them."""

    @property
    def chunks(self) -> pd.DataFrame: ...

    @property
    def corpus(self) -> pd.DataFrame: ...

    @property
    def inputs_key(self) -> str: ...

    @property
    def document_hashes(self) -> pd.Series: ...


def index_name(source: ChunkSource) -> str:
    """The index's directory name: chunk_table_hash. Hashing every chunk's text costs ~0.5 s
    a run at 100k chunks; the chunk table follows from the validated inputs alone (their
    key, Workspace.inputs_key, covers every input file's bytes, the run, the loader's
    arguments and code), so the hash is computed once per inputs entry and kept beside it
    (tasks/inputs/validated_cache.py), keyed by INDEX_FORMAT too. No key (""): computed now."""
    return kept_with_inputs(source.inputs_key, "index", INDEX_FORMAT,
                            lambda: snapshot_digest(INDEX_FORMAT, source.chunks, source.document_hashes))


def build_index_dir(chunks: pd.DataFrame, corpus: pd.DataFrame, root: Path) -> Path:
    """Build (or reuse) the index for this chunk table under `root/<hash>`; atomic. An
    existing index is checked first (its seal and format: DirStore.checked_dir); a damaged one is moved aside, with one
    warning line, and built again."""
    return index_dir_for(_Tables(chunks, corpus), root)


@dataclass(frozen=True, eq=False)
class _Tables:
    chunks: pd.DataFrame
    corpus: pd.DataFrame
    inputs_key: str = ""

    @cached_property  # the index's name and its build both read it
    def document_hashes(self) -> pd.Series:
        return corpus_document_hashes(self.chunks, self.corpus)


def index_dir_for(source: ChunkSource, root: Path) -> Path:
    """build_index_dir for `source`, named by index_name: its tables are read only when the
    name is not known yet or the index must be built."""
    return index_build(source, root).path


def index_build(source: ChunkSource, root: Path) -> IndexBuild:
    """The index of `source` under `root`, and how it came about: found whole, or built
    (tasks/steps/index_build.py: the previous index's unchanged rows kept, only new chunk
    texts tokenised)."""
    store = dir_store("indexes", root)
    name = index_name(source)
    found = store.checked_dir(name, "rebuilding it", check_format, mark=False)  # the run marks its use
    if found is not None:
        return IndexBuild(found, built=False)
    return build_in_store(store, name, source.chunks, source.corpus, source.document_hashes)


@lru_cache(maxsize=4)
def _load(index_dir: str) -> tuple[tantivy.Searcher, tantivy.Schema, BatchedRows]:
    index = tantivy.Index.open(str(Path(index_dir) / "tantivy"))
    index.reload()
    # Zero-copy: the table's buffers are the mapped file's pages, read on demand; the map
    # stays open as long as the table (cached here) lives. Rows are taken per record batch.
    return index.searcher(), index.schema, BatchedRows(read_rows(Path(index_dir)))


def index_chunks(index_dir: str) -> pa.Table:
    """Every indexed chunk (chunk_id, doc_id, char_start, char_end, text, gaps, hashes,
    terms: index_build.ROW_SCHEMA), memory-mapped:
    where each chunk sits in its document (tasks/steps/boundary.py joins neighbours)."""
    return _load(index_dir)[2].table


_ROWS_AT_ONCE = 4096  # rows taken between two hand-backs of mapped pages (index_rows)


def index_rows(index_dir: str, rows: np.ndarray | list[int], columns: list[str]) -> pa.Table:
    """These rows (in this order) of these columns of the index's chunk table, read from
    the record batches holding them (never a copy of the whole table). `take` copies them:
    the mapped pages read for them are handed back (tasks/state/_mapped.py), so a search over
    a 10M-chunk index does not keep the gigabytes it touched in this process's RSS."""
    table, rows = _load(index_dir)[2], np.asarray(rows, dtype=np.int64)
    parts = []
    for lo in range(0, max(len(rows), 1), _ROWS_AT_ONCE):  # a slice's faulted-in pages handed back before the next
        parts.append(table.take(rows[lo:lo + _ROWS_AT_ONCE], columns))
        release_mapped_pages()
    return parts[0] if len(parts) == 1 else pa.concat_tables(parts)


def chunk_rows(index_dir: str, rows: list[int]) -> dict[int, tuple[str, str, int, str]]:
    """row → (chunk_id, doc_id, char_start, text) for just these rows of the index."""
    if not rows:
        return {}
    meta = index_rows(index_dir, rows, ["chunk_id", "doc_id", "char_start", "text"])
    cols = [meta.column(c).to_pylist() for c in ("chunk_id", "doc_id", "char_start", "text")]
    return dict(zip(rows, zip(*cols)))


def search_rows(index_dir: str, terms: list[str], k: int) -> list[tuple[int, float]]:
    """(row in CHUNKS_FILE, BM25 score) of the top-k chunks for an OR-query of `terms`,
    best first (ties: index order)."""
    searcher, schema, _ = _load(index_dir)
    unique = sorted(set(terms))
    if not unique or k <= 0:
        return []
    query = tantivy.Query.boolean_query(
        [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "body", t)) for t in unique])
    hits = searcher.search(query, k, count=False).hits
    if not hits:
        return []
    rows = searcher.fast_field_values("row", [a for _, a in hits])
    return [(int(r), float(s)) for (s, _), r in zip(hits, rows)]


def claims_needing_search(claims: pd.DataFrame, judgements: pd.DataFrame, support_threshold: float) -> pd.DataFrame:
    """Claims with no supported retrieved passage and no judge error (those end
    `unjudged` whatever the corpus holds), and that decomposed fine."""
    retrieved = judgements[judgements["source"] == "retrieved"]
    ok = (retrieved["verdict"] == "supported") & (retrieved["confidence"] >= support_threshold)
    settled = set(retrieved.loc[ok, "claim_id"]) | set(retrieved.loc[retrieved["error"].notna(), "claim_id"])
    keep = ~among(claims["claim_id"], settled) & claims["decompose_error"].isna()
    return claims[keep]


def hits_for_claims(claims: pd.DataFrame, retrieved_chunks: dict[str, set[str]], index_dir: str, top_k: int) -> pd.DataFrame:
    """Top-k never-retrieved chunks per claim, as judge passages (source `corpus`)."""
    rows: list[dict] = []
    if top_k == 0 or claims.empty:
        return schemas.table(rows, schemas.Passages)
    n = index_chunks(index_dir).num_rows
    recs = claims.to_dict("records")
    widest = max((len(retrieved_chunks.get(c["question_id"], ())) for c in recs), default=0)
    k = min(n, top_k + widest)
    found = [search_rows(index_dir, index_terms(c["claim"]), k) for c in recs]
    meta = chunk_rows(index_dir, sorted({d for hits in found for d, _ in hits}))
    for c, hits in zip(recs, found):
        seen = retrieved_chunks.get(c["question_id"], set())
        taken = 0
        for d, s in hits:
            if taken == top_k or s <= 0:
                break
            chunk_id, doc_id, start, text = meta[d]
            if chunk_id in seen:
                continue
            rows.append({
                "question_id": c["question_id"], "claim_id": c["claim_id"], "source": "corpus",
                "chunk_id": chunk_id, "doc_id": doc_id, "passage_start": int(start),
                "rank": None, "in_context": False, "score": s, "passage_text": text,
            })
            taken += 1
    return schemas.table(rows, schemas.Passages)


# Not cached by Prefect: the index directory is its own cache (keyed by content hash),
# and a cached path could outlive a deleted directory.
@task(name="build-index", cache_policy=NO_CACHE)
def build_index(source: ChunkSource, root: str) -> str:
    """`source`: the validated workspace (its tables read only when needed: index_dir_for)."""
    return str(index_dir_for(source, Path(root)))


@step_task("corpus-search")
def corpus_search(
    claims: pd.DataFrame, judgements: pd.DataFrame, passages: pd.DataFrame,
    index_dir: str, top_k: int, support_threshold: float, code: str,
) -> pd.DataFrame:
    retrieved = passages[passages["source"] == "retrieved"]
    seen = retrieved.groupby("question_id")["chunk_id"].agg(set).to_dict()
    pending = claims_needing_search(claims, judgements, support_threshold)
    return hits_for_claims(pending, seen, index_dir, top_k)
