"""Every chunk's text analysed once, at index time (tasks/core/text_analysis.py, written by
tasks/steps/index_build.py): read back it is what a fresh analysis of the text gives, an
updated index holds the arrays a fresh build writes, and an index of another analysis is
built anew with one line saying so."""

from __future__ import annotations

import pandas as pd
import pytest
from ragspan.tasks.core.text import word_info
from ragspan.tasks.core.text_analysis import (
    ANALYSIS_FILE,
    CONTENT,
    ENTITY,
    FORMS_FILE,
    NEGATION,
    NUMBER,
    ChunkAnalyses,
    analyse,
)
from ragspan.tasks.steps import index_build as ib
from ragspan.tasks.steps.corpus_search import _Tables, index_build

TEXTS = [
    "The café opened in 1998. It serves 1,200 cups a day; prices rose 3.5 % in v2.4.1!",
    "Cafe\u0301 au lait, naïve re\u0301sume\u0301 — not the Zürich office.\r\nSecond line here.\r\n",
    "Emoji 🎉 between words 👩\u200d👩\u200d👧 and flags 🇫🇷 stay out of words. Don't stop.",
    "東京は日本の首都です。人口は約1400万人。Tokyo's population isn't small.",
    "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ and ligature ﬁle; Straße vs STRASSE.\n\n   \n",
    "no words at all? ... !!!",
    "",
    "   \t  ",
    "A single line without a full stop but with NASA, the U.S. and Dr. Smith",
]


def _tables(texts: list[str], halves: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One document per text, chunked as two halves (cut anywhere: inside a word, a cluster,
    a CRLF) or whole; an empty text: one empty chunk."""
    corpus = pd.DataFrame({"doc_id": [f"d{i}" for i in range(len(texts))], "text": texts})
    rows = []
    for i, t in enumerate(texts):
        cut = len(t) // 2
        for k, (a, b) in enumerate([(0, cut), (cut, len(t))] if t and halves else [(0, len(t))]):
            rows.append({"chunk_id": f"d{i}#{k}", "doc_id": f"d{i}", "char_start": a, "char_end": b})
    return corpus, pd.DataFrame(rows)


def _read_back_equals_fresh(index_dir, texts: list[str]) -> None:
    held = ChunkAnalyses(index_dir)
    rows = held.rows_of(texts)
    assert (rows >= 0).all()
    for text, row in zip(texts, rows.tolist()):
        got, fresh = held.words(row), analyse(text)
        infos = [word_info(f) for f in fresh.forms]
        assert got.starts == fresh.starts and got.ends == fresh.ends, text
        assert [text[s:e] for s, e in zip(got.starts, got.ends)] == fresh.forms
        assert got.norms == [i.norm for i in infos]
        assert got.flags == [CONTENT * (not i.is_stop) | NEGATION * i.is_negation | NUMBER * i.is_number
                             | ENTITY * i.is_entity for i in infos]
        assert got.sentences == fresh.sentences


@pytest.mark.parametrize("halves", [False, True])
def test_the_analysis_read_back_is_a_fresh_analysis(tmp_path, halves):
    corpus, chunks = _tables(TEXTS, halves)
    built = index_build(_Tables(chunks, corpus), tmp_path / "index")
    texts = ib.read_rows(built.path).column("text").to_pylist()
    assert (texts == TEXTS) != halves
    _read_back_equals_fresh(built.path, texts)


def test_a_text_no_chunk_holds_is_not_found(tmp_path):
    corpus, chunks = _tables(TEXTS[:3])
    built = index_build(_Tables(chunks, corpus), tmp_path / "index")
    held = ChunkAnalyses(built.path)
    assert held.rows_of(["not a chunk", TEXTS[0]]).tolist() == [-1, -1]


def test_an_updated_index_equals_a_fresh_build_arrays_included(tmp_path, monkeypatch):
    corpus, chunks = _tables(TEXTS)
    root = tmp_path / "index"
    first = index_build(_Tables(chunks, corpus), root)
    monkeypatch.setattr(ib, "_ANALYSED_AT_ONCE", 3)  # the texts analysed in parts, joined
    changed = corpus.copy()
    changed.loc[1, "text"] = "Brand new words: ornithopter 42 kg.\r\n" + changed.loc[1, "text"]
    changed.loc[3, "text"] = TEXTS[0]  # a text the previous index held: looked up, not analysed
    _, new_chunks = _tables(changed["text"].tolist())
    again = index_build(_Tables(new_chunks, changed), root)
    assert again.previous == first.path and 0 < again.tokenised < len(new_chunks) and again.kept
    fresh = index_build(_Tables(new_chunks, changed), tmp_path / "fresh")
    for name in (ib.CHUNKS_FILE, ANALYSIS_FILE, FORMS_FILE):
        assert ib.read_rows(again.path, name).equals(ib.read_rows(fresh.path, name)), name
    # forms of the removed text are gone, as a fresh build never had them
    _read_back_equals_fresh(again.path, ib.read_rows(again.path).column("text").to_pylist())


def test_an_index_of_another_analysis_is_built_anew_with_one_line(tmp_path, capfd, monkeypatch):
    corpus, chunks = _tables(TEXTS)
    root = tmp_path / "index"
    first = index_build(_Tables(chunks, corpus), root)
    ib.analysis_key.cache_clear()
    monkeypatch.setattr(ib, "analysis_key", lambda: "another-analysis")
    capfd.readouterr()
    again = index_build(_Tables(chunks, corpus), root)
    err = capfd.readouterr().err
    assert again.path != first.path and again.previous is None and again.tokenised == len(chunks)
    assert err.count("\n") == 1 and "built anew" in err, err
    assert first.path.exists()  # an older format is not damage: left for pruning


@pytest.mark.parametrize("text", TEXTS)
def test_analyse_is_the_judges_own_reading(text):
    """The verifier's passage profile is built from `analyse` (one code path, both ways)."""
    from ragspan.tasks.judges.verifier.tokens import tokens

    fresh = analyse(text)
    toks = tokens(text)
    assert [t.start for t in toks] == fresh.starts and [t.end for t in toks] == fresh.ends


def test_the_local_judge_reads_chunks_from_the_index_and_judges_the_same(tmp_path, monkeypatch):
    """Verdicts, quotes and marks with the index's analyses are those without them; the
    chunks' profiles were read from the arrays (the windows-like texts tokenised)."""
    from ragspan.tasks.judges.base import JudgeRuntime, JudgeSpec
    from ragspan.tasks.judges.local import LocalJudge
    from ragspan.tasks.judges.verifier import bulk, chunks, profiles

    corpus, table = _tables(TEXTS, halves=False)
    built = index_build(_Tables(table, corpus), tmp_path / "index")
    passages = [t for t in TEXTS if t.strip()] + ["A window: The café opened in 1998 and Tokyo's population."]
    claims = ["The café opened in 1998.", "Prices rose 3.5 % in v2.4.1.", "Tokyo's population is small.",
              "The Zürich office is not naïve.", "Dr. Smith works at NASA."]
    items = [(c, passages, "When did the café open?", k == 0) for k, c in enumerate(claims)]

    def judged(index_dir):
        profiles.passage_profile.cache_clear()
        profiles.passage_norms.cache_clear()
        bulk.BULK.cache_clear()
        return LocalJudge(JudgeSpec(), JudgeRuntime(index_dir=index_dir)).judge_many(items)

    stored = []

    def words_of(text):
        found = chunks.words_of(text)
        stored.extend([text] if found is not None else [])
        return found

    monkeypatch.setattr(profiles, "words_of", words_of)
    monkeypatch.setattr(bulk, "words_of", words_of)
    fresh = judged(None)
    assert not stored
    from_index = judged(str(built.path))
    assert from_index == fresh
    assert set(stored) == set(passages[:-1])  # every chunk read from the index; the window (no chunk) tokenised
    chunks.use_index(None)
