"""The corpus index built from the previous one (tasks/steps/index_build.py) is the index a
fresh build makes: the same chunks.arrow table and the same BM25 hits and scores — terms of
removed or edited documents included — and only chunk texts never seen are tokenised."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from ragspan.tasks.core.chunk_split import MAX_GAP, gaps_between
from ragspan.tasks.state import _heal as heal
from ragspan.tasks.steps import index_build as ib
from ragspan.tasks.steps.corpus_search import (
    _Tables,
    index_build,
    index_chunks,
    index_terms,
    search_rows,
)

WORDS = ["river", "delta", "harbour", "granite", "basalt", "orchard", "vineyard", "glacier", "meadow", "canyon",
         "lagoon", "plateau", "volcano", "tundra", "savanna", "estuary", "marsh", "fjord", "steppe", "archipelago"]


def _sentence(rng: np.random.Generator, n: int) -> str:
    return " ".join(rng.choice(WORDS, n)).capitalize() + f" {int(rng.integers(1, 999))}."


def _corpus(docs: int, seed: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """docs documents of 3–6 sentences, one chunk per sentence pair, a space or two between
    chunks (the gaps), one long stretch no chunk covers in every seventh document."""
    rng = np.random.default_rng(seed)
    texts = []
    for d in range(docs):
        sentences = [_sentence(rng, int(rng.integers(4, 12))) for _ in range(int(rng.integers(3, 7)))]
        if d % 7 == 0:
            sentences.insert(1, "x" * (MAX_GAP + 5))
        texts.append("  ".join(sentences))
    corpus = pd.DataFrame({"doc_id": [f"d{i:03d}" for i in range(docs)], "text": texts})
    return corpus, chunk_by_sentences(corpus)


def chunk_by_sentences(corpus: pd.DataFrame, per_chunk: int = 2) -> pd.DataFrame:
    rows = []
    for doc, text in zip(corpus["doc_id"], corpus["text"]):
        spans, pos = [], 0
        for part in text.split("  "):
            start = text.index(part, pos)
            pos = start + len(part)
            if not part.startswith("x"):
                spans.append((start, pos))
        for k in range(0, len(spans), per_chunk):
            group = spans[k:k + per_chunk]
            rows.append({"chunk_id": f"{doc}#{k // per_chunk}", "doc_id": doc, "char_start": group[0][0],
                         "char_end": group[-1][1]})
    return pd.DataFrame(rows)


def _build(chunks: pd.DataFrame, corpus: pd.DataFrame, root: Path) -> ib.IndexBuild:
    return index_build(_Tables(chunks, corpus), root)


def _fresh(chunks: pd.DataFrame, corpus: pd.DataFrame, tmp_path: Path) -> ib.IndexBuild:
    return _build(chunks, corpus, tmp_path / f"fresh-{time.monotonic_ns()}")


QUERIES = ["river delta", "granite basalt 17", "zebra quokka", "orchard", "glacier lagoon fjord",
           "appended wombat sentence", "renamed", "steppe"]


def _assert_same_index(a: Path, b: Path, extra_queries: list[str] = ()) -> None:
    assert index_chunks(str(a)).equals(index_chunks(str(b)))
    n = index_chunks(str(a)).num_rows
    for q in [*QUERIES, *extra_queries]:
        terms = index_terms(q)
        assert search_rows(str(a), terms, n) == search_rows(str(b), terms, n), q


@pytest.fixture
def base(tmp_path):
    corpus, chunks = _corpus(60)
    root = tmp_path / "index"
    first = _build(chunks, corpus, root)
    assert first.built and first.previous is None and first.tokenised == first.rows == len(chunks)
    return corpus, chunks, root, first


def _edited(corpus: pd.DataFrame, doc: str, edit) -> pd.DataFrame:
    out = corpus.copy()
    i = out.index[out["doc_id"] == doc][0]
    out.loc[i, "text"] = edit(out.loc[i, "text"])
    return out


def test_an_edit_inside_a_chunk_tokenises_that_chunk_only(base, tmp_path):
    corpus, chunks, root, first = base
    c = chunks[chunks["doc_id"] == "d003"].iloc[0]
    new = _edited(corpus, "d003", lambda t: t[:c.char_start] + "Zebra" + t[c.char_start + 5:])
    again = _build(chunks, new, root)
    assert again.previous == first.path and again.tokenised == 1
    assert again.kept == len(chunks) - (chunks["doc_id"] == "d003").sum()
    _assert_same_index(again.path, _fresh(chunks, new, tmp_path).path, ["zebra"])


def test_an_edit_between_chunks_only_tokenises_nothing(base, tmp_path):
    corpus, chunks, root, _ = base
    c = chunks[chunks["doc_id"] == "d005"].iloc[0]
    new = _edited(corpus, "d005", lambda t: t[:c.char_end] + "#!" + t[c.char_end + 2:])  # the two spaces
    again = _build(chunks, new, root)
    assert again.tokenised == 0 and again.looked_up == (chunks["doc_id"] == "d005").sum()
    assert again.path.name != base[3].path.name
    _assert_same_index(again.path, _fresh(chunks, new, tmp_path).path)
    gaps = index_chunks(str(again.path)).to_pandas().set_index("chunk_id")
    assert gaps.loc[c.chunk_id, "gap_after"] == "#!"


def test_an_appended_sentence_tokenises_each_documents_last_chunk(base, tmp_path):
    corpus, chunks, root, _ = base
    docs = ["d001", "d010", "d020"]
    new = corpus.copy()
    new["text"] = [t + "  Appended wombat sentence." if d in docs else t for d, t in zip(new["doc_id"], new["text"])]
    last = chunks.groupby("doc_id").tail(1).index
    grown = chunks.copy()
    grown.loc[grown.index.isin(last) & grown["doc_id"].isin(docs), "char_end"] += len("  Appended wombat sentence.")
    again = _build(grown, new, root)
    assert again.tokenised == 3 and again.looked_up == chunks["doc_id"].isin(docs).sum() - 3
    _assert_same_index(again.path, _fresh(grown, new, tmp_path).path)


def test_documents_added_removed_rechunked_and_renamed(base, tmp_path):
    corpus, _, root, _ = base
    extra, _ = _corpus(3, seed=9)
    extra["doc_id"] = ["n1", "n2", "n3"]
    extra.loc[0, "text"] = "Quokka burrow near the estuary.  " + extra.loc[0, "text"]
    removed = ["d002", "d004"]  # their terms must leave BM25's statistics
    new = pd.concat([corpus[~corpus["doc_id"].isin(removed)], extra], ignore_index=True)
    rechunked = pd.concat([chunk_by_sentences(new[new["doc_id"] == "d006"], per_chunk=1),
                           chunk_by_sentences(new[~new["doc_id"].isin(["d006"])])], ignore_index=True)
    rechunked["chunk_id"] = rechunked["chunk_id"].where(rechunked["doc_id"] != "d007",
                                                        rechunked["chunk_id"] + "-renamed")
    rechunked = rechunked.sample(frac=1, random_state=3).reset_index(drop=True)  # any row order
    again = _build(rechunked, new, root)
    changed = rechunked["doc_id"].isin(["d006", "d007", "n1", "n2", "n3"])
    assert again.kept == (~changed).sum()
    assert again.tokenised <= (rechunked["doc_id"].isin(["d006", "n1", "n2", "n3"])).sum()
    assert again.looked_up >= (rechunked["doc_id"] == "d007").sum()
    removed_text = " ".join(corpus.loc[corpus["doc_id"].isin(removed), "text"])
    _assert_same_index(again.path, _fresh(rechunked, new, tmp_path).path, ["quokka burrow", removed_text[:200]])
    assert again.rows == index_chunks(str(again.path)).num_rows == len(rechunked)


def test_an_unchanged_snapshot_is_found_not_built(base):
    corpus, chunks, root, first = base
    again = _build(chunks, corpus, root)
    assert not again.built and again.path == first.path


def test_a_damaged_previous_index_is_not_used(base, tmp_path, capfd):
    corpus, chunks, root, first = base
    blob = bytearray((first.path / ib.CHUNKS_FILE).read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    (first.path / ib.CHUNKS_FILE).write_bytes(bytes(blob))
    new = _edited(corpus, "d001", lambda t: t + "  Appended wombat sentence.")
    capfd.readouterr()
    again = _build(chunks, new, root)
    assert again.previous is None and again.tokenised == len(chunks)
    assert "not reused" in capfd.readouterr().err and not first.path.exists()  # moved aside
    _assert_same_index(again.path, _fresh(chunks, new, tmp_path).path)


def test_an_older_format_is_passed_over_in_silence(base, tmp_path, capfd, monkeypatch):
    _, _, root, first = base
    monkeypatch.setattr(ib, "INDEX_FORMAT", "tantivy-next")
    capfd.readouterr()
    assert ib.previous_index(ib.DirStore(root, "corpus index"), "other") is None
    assert capfd.readouterr().err == "" and first.path.exists()


def test_gap_ranges_are_gaps_between_for_every_document():
    rng = np.random.default_rng(5)
    text = "".join(rng.choice(list("ab "), 400))
    docs = np.array([0, 1, 0, 1, 0, 0, 1, 0])
    starts = np.array([0, 10, 50, 3, 50, 120, 40, 20 + MAX_GAP])
    ends = np.array([40, 30, 90, 8, 60, 125, 60, 30 + MAX_GAP])
    (blo, bhi), (alo, ahi) = ib.gap_ranges(docs, starts, ends)
    long = text * 4
    for d in (0, 1):
        rows = np.flatnonzero(docs == d)
        rows = rows[np.lexsort((ends[rows], starts[rows]))]
        before, after = gaps_between(starts[rows].tolist(), ends[rows].tolist(), long)
        got_b = [None if h - lo > MAX_GAP else long[lo:h] for lo, h in zip(blo[rows], bhi[rows])]
        got_a = [None if h - lo > MAX_GAP else long[lo:h] for lo, h in zip(alo[rows], ahi[rows])]
        assert got_b == before and got_a == after


def test_a_cold_build_in_worker_processes_is_the_same_index(tmp_path, monkeypatch):
    corpus, chunks = _corpus(40, seed=4)
    here = _fresh(chunks, corpus, tmp_path)
    monkeypatch.setattr(ib, "POOL_MIN_TEXTS", 1)
    monkeypatch.setattr(ib, "BATCH_ROWS", 16)
    pooled = _fresh(chunks, corpus, tmp_path)
    assert pooled.tokenised == len(chunks)
    _assert_same_index(pooled.path, here.path)


_SLOW_BUILD = textwrap.dedent("""
    import pickle, sys
    from pathlib import Path
    from ragspan.tasks.steps import index_build as ib
    from ragspan.tasks.steps.corpus_search import _Tables, index_build
    ib.BATCH_ROWS = 4
    slow = ib.joined_terms
    def joined_terms(texts):
        import time; time.sleep(0.5)
        return slow(texts)
    ib.joined_terms = joined_terms
    chunks, corpus = pickle.loads(Path(sys.argv[1]).read_bytes())
    index_build(_Tables(chunks, corpus), Path(sys.argv[2]))
""")


def test_a_build_killed_midway_leaves_the_previous_index_whole(base, tmp_path):
    corpus, chunks, root, first = base
    new = _edited(corpus, "d001", lambda t: "Zebra " * 50 + t)
    new["text"] = [t + "  Appended wombat sentence." for t in new["text"]]  # every document changed
    tables = tmp_path / "tables.pickle"
    tables.write_bytes(pd.io.pickle.pickle.dumps((chunks, new)))
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_BUILD, str(tables), str(root)],
                            env={**os.environ, "RAGSPAN_HOME": str(tmp_path / "state")})
    deadline = time.monotonic() + 60
    while not any(p.name.startswith(".tmp-") and (p / "tantivy").exists() for p in root.iterdir()):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert [p.name for p in root.iterdir() if not p.name.startswith(".")] == [first.path.name]
    assert heal.check_sealed(first.path) is None
    again = _build(chunks, new, root)
    assert again.previous == first.path
    _assert_same_index(again.path, _fresh(chunks, new, tmp_path).path)


def test_the_rows_are_the_chunk_tables_with_texts_and_terms(base):
    corpus, chunks, _, first = base
    t = index_chunks(str(first.path)).to_pandas()
    text = dict(zip(corpus["doc_id"], corpus["text"]))
    assert t["chunk_id"].tolist() == chunks["chunk_id"].tolist()
    assert t["text"].tolist() == [text[d][s:e] for d, s, e in zip(chunks["doc_id"], chunks["char_start"],
                                                                   chunks["char_end"])]
    assert t["terms"].tolist() == [" ".join(index_terms(x)) for x in t["text"]]
    assert pa.types.is_uint64(index_chunks(str(first.path)).schema.field("doc_hash").type)
