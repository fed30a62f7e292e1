"""Every chunk text analysed once, kept with the corpus index (tasks/core/analysis.py).

The index build writes each chunk's words (offsets, norm ids, flags) beside its chunk
table; the local judge and the bulk bound read a chunk's words from there. What
is read back must be exactly what analysing the text gives, an index updated after a
corpus change must hold the arrays a fresh build writes, the arrays' format must follow
the code that makes them, and verdicts must be the same with and without them."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import REPO
from hypothesis import given, settings
from hypothesis import strategies as st
from ragspan.tasks.config import ANALYSIS_ROOTS, source_hash
from ragspan.tasks.core import analysis as an
from ragspan.tasks.core.text import content_norms
from ragspan.tasks.judges.verifier import model_path, verifier
from ragspan.tasks.judges.verifier.bulk import BulkBound
from ragspan.tasks.judges.verifier.profiles import passage_profile, passage_profiles, stored_profile
from ragspan.tasks.judges.verifier.tokens import word_offsets
from ragspan.tasks.steps.corpus_search import _Tables, index_build
from test_code_version import _copy_package, _parts, _touch

# Texts that test the word pattern's edges: joiners, accents, combining marks, wide and
# unusual spaces, numbers with separators, contractions, codes, a lone line of no words.
HARD = [
    "Héllo wörld—it's 1,200.5 km/h; v2.4.1 isn't _x_ here.\u00a0Ünïcode ＡＢＣ at 12:30 on 3/4.",
    "-a- b--c 'q' x.y. ’s rock’n’roll e\u0301te\u0301 naïve café\n\n• Bullet one\n• Bullet two",
    "U.S. dollars: 5,000.50 (about €4,600) — not 5000; the U.N.'s 2nd report, 27-30% by 2004's end.",
    "...",
    "no sentence end and no capital",
    "Zürich's e-mail rose 30 % by 2004. İstanbul ß ǅ Ⅻ ² ½ ٣ 三 x\u200by.",
    "Line one\r\nLine two\tTabbed   spaces.  Trailing  ",
]


def _corpus(docs: int = 30, seed: int = 3) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    words = ["river", "Delta", "harbour", "granite", "1,932", "not", "U.S.", "e-mail", "Zürich", "fjord's", "30%"]
    texts, rows = [], []
    for d in range(docs):
        parts = [" ".join(rng.choice(words, int(rng.integers(3, 9)))).capitalize() + "." for _ in range(4)]
        parts.append(HARD[d % len(HARD)])
        text, pos = "", 0
        for k, part in enumerate(parts):
            start = len(text)
            text += part + "  "
            rows.append({"chunk_id": f"d{d:02d}#{k}", "doc_id": f"d{d:02d}", "char_start": start,
                         "char_end": start + len(part)})
        texts.append(text)
    return pd.DataFrame({"doc_id": [f"d{d:02d}" for d in range(docs)], "text": texts}), pd.DataFrame(rows)


def _texts(chunks: pd.DataFrame, corpus: pd.DataFrame) -> list[str]:
    doc = dict(zip(corpus["doc_id"], corpus["text"]))
    return [doc[d][s:e] for d, s, e in zip(chunks["doc_id"], chunks["char_start"], chunks["char_end"])]


def _build(chunks: pd.DataFrame, corpus: pd.DataFrame, root: Path):
    return index_build(_Tables(chunks, corpus), root)


def test_the_analysis_is_the_texts_words_and_sentences():
    got = an.analyse(HARD + ["", "a"])
    for row, text in enumerate(HARD + ["", "a"]):
        words, starts, ends = word_offsets(text)
        assert got.rows.column("starts")[row].as_py() == starts
        assert got.rows.column("ends")[row].as_py() == ends
    assert got.terms == [" ".join(content_norms(t)) for t in HARD + ["", "a"]]
    # ids come from the norms' text: the same in a batch of its own, in another order
    alone = an.analyse([HARD[2]])
    assert alone.rows.column("ids")[0].as_py() == got.rows.column("ids")[2].as_py()


_PIECES = st.sampled_from(["a", "Zb", "é", "e\u0301", "1", "2,5", "_", " ", "  ", "\n", "\r\n", ".", ",", "'", "’", ":",
                           "/", "-", "—", "%", "ß", "İ", "Ⅻ", "²", "三", "\u00a0", "\u200b", "!", "?", "Mr.", "U.S.",
                           "not", "isn't", "The", "30%", "v2.4"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_PIECES, max_size=30).map("".join), min_size=1, max_size=5))
def test_random_texts_are_analysed_as_the_judge_reads_them(texts):
    got = an.analyse(texts)
    vocab = dict(zip(got.norms.column("id").to_pylist(), got.norms.column("norm").to_pylist()))
    for row, text in enumerate(texts):
        p = passage_profile.__wrapped__(text)
        ids = got.rows.column("ids")[row].as_py()
        flags = got.rows.column("flags")[row].as_py()
        assert tuple(got.rows.column("starts")[row].as_py()) == p.starts
        assert tuple(got.rows.column("ends")[row].as_py()) == p.ends
        assert tuple(vocab[i] for i in ids) == p.norms and all(an.norm_id(vocab[i]) == i for i in ids)
        assert tuple(bool(f & an.CONTENT) for f in flags) == p.content
        assert tuple(bool(f & an.ENTITY) for f in flags) == p.entities
        assert tuple(bool(f & an.NEGATION) for f in flags) == p.negs
        assert tuple(bool(f & an.NUMBER) for f in flags) == p.numbers


def test_an_analysis_read_back_is_a_fresh_profile(tmp_path):
    corpus, chunks = _corpus()
    built = _build(chunks, corpus, tmp_path / "index")
    stored = an.open_analysis(str(built.path))
    texts = _texts(chunks, corpus)
    rows = stored.rows_of(texts)
    assert (rows >= 0).all()
    for text, row in zip(texts, rows.tolist(), strict=True):
        assert stored_profile(stored, row) == passage_profile.__wrapped__(text), text
    # a text the index does not hold is analysed, not looked up; a near miss is not taken
    assert stored.rows_of(["not a chunk of this corpus", texts[0] + " "]).tolist() == [-1, -1]
    profiles = passage_profiles([texts[3], "elsewhere entirely.", texts[3]], stored)
    assert profiles["elsewhere entirely."] == passage_profile.__wrapped__("elsewhere entirely.")
    assert profiles[texts[3]] == passage_profile.__wrapped__(texts[3])


def _same_arrays(a: Path, b: Path) -> None:
    """Two indexes hold the same chunk rows and the same analysis, arrays included, and
    every norm id either uses resolves to the same norm."""
    read = an._mapped_table
    assert read(a / an.CHUNKS_FILE).equals(read(b / an.CHUNKS_FILE))
    assert read(a / an.ANALYSIS_FILE).equals(read(b / an.ANALYSIS_FILE))
    ids = np.unique(read(a / an.ANALYSIS_FILE).column("ids").combine_chunks().values.to_numpy())
    sa, sb = an.open_analysis(str(a)), an.open_analysis(str(b))
    assert sa.norms_of(ids.tolist()) == sb.norms_of(ids.tolist())
    # a fresh build's norms are exactly those its chunks use
    assert read(b / an.NORMS_FILE).column("id").to_numpy().tolist() == ids.tolist()


def test_an_updated_index_holds_the_arrays_of_a_fresh_build(tmp_path):
    corpus, chunks = _corpus()
    root = tmp_path / "index"
    _build(chunks, corpus, root)
    changed = corpus.copy()
    old = changed.loc[0, "text"]
    changed.loc[0, "text"] = old.replace("Ünïcode", "Unicode changed 77")  # in d00's last chunk
    delta = len(changed.loc[0, "text"]) - len(old)
    new = changed[changed["doc_id"] != "d05"]  # and a document removed
    new_chunks = chunks[chunks["doc_id"] != "d05"].reset_index(drop=True)
    new_chunks.loc[new_chunks["chunk_id"] == "d00#4", "char_end"] += delta
    assert delta != 0
    updated = _build(new_chunks, new, root)
    assert updated.previous is not None and 0 < updated.tokenised < updated.rows
    fresh = _build(new_chunks, new, tmp_path / f"fresh-{time.monotonic_ns()}")
    _same_arrays(updated.path, fresh.path)


def test_the_index_format_follows_the_analysis_code(tmp_path):
    root = _copy_package(tmp_path)
    before = source_hash(ANALYSIS_ROOTS, _parts(root))
    for name in ("tasks/core/analysis.py", "tasks/core/text.py"):
        _touch(root / name)
        after = source_hash(ANALYSIS_ROOTS, _parts(root))
        assert after != before, name
        before = after
    _touch(root / "tasks/judges/verifier/features.py")  # the judge is not the analysis
    assert source_hash(ANALYSIS_ROOTS, _parts(root)) == before
    assert (REPO / "tasks/core/analysis.py").is_file()


def _items(texts: list[str]) -> list[tuple[str, list[str], str, bool]]:
    claims = ["The river delta is granite.", "Zürich's e-mail rose 30% by 2004.", "Not 5,000.50 U.S. dollars.",
              "Delta.", "Yes.", "The harbour fjord is not granite 1,932."]
    rng = np.random.default_rng(7)
    return [(c, [texts[i] for i in rng.choice(len(texts), 6)] + ["a passage of no chunk: river delta."],
             "Is the delta granite?" if k % 2 else "", k % 3 == 0) for k, c in enumerate(claims * 4)]


@pytest.mark.parametrize("bound", [0.0, 0.2, None, 1.0])
def test_the_bulk_bound_is_the_same_with_the_stored_words(tmp_path, bound):
    corpus, chunks = _corpus()
    stored = an.open_analysis(str(_build(chunks, corpus, tmp_path / "index").path))
    items = _items(_texts(chunks, corpus))
    bound = verifier().model.bound if bound is None else bound
    want = [None if g is None else g.tolist() for g in BulkBound().below(items, bound)]
    got = [None if g is None else g.tolist() for g in BulkBound(max_passages=2, max_claims=2).below(items, bound, stored)]
    assert got == want
    words = ["river", "granit", "zürich", "30", "absent"]
    shown = items[0][1]
    assert BulkBound().stated(shown, words, stored).tolist() == BulkBound().stated(shown, words).tolist()


def test_verdicts_are_the_same_with_the_stored_words(tmp_path):
    corpus, chunks = _corpus()
    stored = an.open_analysis(str(_build(chunks, corpus, tmp_path / "index").path))
    items = _items(_texts(chunks, corpus))
    v = verifier(model_path())
    assert v.fixed_rows(items, stored) == v.fixed_rows(items)
    fresh_competing: list = []
    stored_competing: list = []
    fresh = v.rows(items, fresh_competing)
    assert v.rows(items, stored_competing, stored) == fresh and stored_competing == fresh_competing
    assert any(r[0] == "supported" for rows in fresh for r in rows)  # something is decided by the words
    assert pa.types.is_uint64(an.ANALYSIS_SCHEMA.field("ids").type.value_type)
