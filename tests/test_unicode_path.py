"""Offsets under Unicode across the whole path: chunking, recovery of retrieved text,
normalised quote matching, answer offsets — and one real evaluate run on a corpus full
of combining marks, ZWJ emoji, CJK, RTL, CRLF, NBSP and soft hyphens, where every span
written satisfies `doc[char_start:char_end] == span_text` (and its UTF-8 byte offsets
slice the same text out of the encoded document).

tests/test_offsets.py covers the text primitives (locate_quote, normalize_with_map,
split_claims) one by one; this file covers the steps that use them."""

from __future__ import annotations

import itertools
import json
import random
import unicodedata
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ragspan.tasks.core import schemas
from ragspan.tasks.core.byte_offsets import utf8_spans
from ragspan.tasks.core.text import normalize
from ragspan.tasks.inputs.load import chunk_corpus, locate_text
from ragspan.tasks.steps.decompose import located_claims
from ragspan.tasks.steps.validate_offsets import judgements_from_candidates

ATOMS = [
    "a", "Z", "7", " ", "  ", "\r\n", "\n", "\r", "\t", ".", "é", "e\u0301", "a\u0308\u0323",  # stacked marks
    "👩\u200d👩\u200d👧", "👍🏽", "🇫🇷", "🙂", "東京", "日本語", "。", "שלום", "مرحبا", "\u200f", "\u202e",  # RTL marks
    "\u00a0", "\u00ad", "\u200b", "“", "”", "’", "—", "ﬁ", "Ⅻ", "Straße", "word", "Refund", "30", "$49", "𝔘",
]
texts = st.lists(st.sampled_from(ATOMS), min_size=1, max_size=60).map("".join)


def _mangle(quote: str, how: int) -> str:
    """What a model or a RAG pipeline does to a quote on its way back."""
    if how == 0:
        return quote
    if how == 1:
        return unicodedata.normalize("NFC", quote)
    if how == 2:
        return " ".join(quote.replace("\u00ad", "").split())  # whitespace collapsed, soft hyphens gone
    return unicodedata.normalize("NFKC", quote).replace("’", "'").replace("\u200b", "").upper()


# -- chunking ------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(st.lists(texts, min_size=1, max_size=3), st.integers(2, 40), st.data())
def test_own_chunks_are_exact_slices_covering_every_character(docs, size, data):
    overlap = data.draw(st.integers(0, size - 1))
    corpus = pd.DataFrame({"doc_id": [f"d{i}" for i in range(len(docs))], "text": docs})
    chunks = chunk_corpus(corpus, size, overlap)
    for i, doc in enumerate(docs):
        mine = chunks[chunks["doc_id"] == f"d{i}"]
        spans = list(zip(mine["char_start"], mine["char_end"]))
        assert all(0 <= s < e <= len(doc) for s, e in spans)
        assert spans[0][0] == 0 and spans[-1][1] == len(doc)
        assert all(s2 <= e1 for (_, e1), (s2, _) in itertools.pairwise(spans))  # no gap: every character is in a chunk


# -- offset recovery of retrieved text -------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.lists(texts, min_size=1, max_size=3), st.data())
def test_retrieved_text_is_recovered_at_raw_offsets(docs, data):
    corpus = pd.DataFrame({"doc_id": [f"d{i}" for i in range(len(docs))], "text": docs})
    k = data.draw(st.integers(0, len(docs) - 1))
    doc = docs[k]
    i = data.draw(st.integers(0, len(doc) - 1))
    j = data.draw(st.integers(i + 1, len(doc)))
    piece = doc[i:j]
    if not piece.strip():
        assert locate_text(corpus, piece, None) is None
        return
    hit = locate_text(corpus, piece, f"d{k}")
    assert hit is not None
    d, s, e = hit
    assert docs[int(d[1:])][s:e] == piece  # exact text: an exact slice
    # The same text with its whitespace runs rewritten (a pipeline that re-wraps lines).
    rewrapped = "\n ".join(piece.split())
    hit = locate_text(corpus, rewrapped, None)
    assert hit is not None
    d, s, e = hit
    found = docs[int(d[1:])][s:e]
    assert 0 <= s < e <= len(docs[int(d[1:])])
    assert found.split() == rewrapped.split()  # equal up to whitespace, never a shifted slice


# -- normalised quote matching inside validate_offsets -------------------------------------------


@settings(max_examples=120, deadline=None)
@given(texts, st.data())
def test_validated_quotes_are_exact_document_slices(doc, data):
    ps = data.draw(st.integers(0, len(doc) - 1))
    pe = data.draw(st.integers(ps + 1, len(doc)))
    passage = doc[ps:pe]
    rows = []
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(passage) - 1))
        j = data.draw(st.integers(i + 1, len(passage)))
        quote = _mangle(passage[i:j], data.draw(st.integers(0, 3)))
        hint = data.draw(st.none() | st.integers(0, len(passage)))
        rows.append({"claim_id": f"c{len(rows)}", "source": "retrieved", "chunk_id": "x", "doc_id": "d",
                     "passage_start": ps, "rank": 1, "in_context": True, "score": None, "verdict": "supported",
                     "confidence": 0.9, "quote": quote, "quote_start": hint, "passage_text": passage,
                     "reason": "", "error": None})
    judged, stats = judgements_from_candidates(schemas.table(rows, schemas.Candidates))
    for row, cand in zip(judged.to_dict("records"), rows, strict=True):
        if pd.isna(row["match"]):
            assert row["error"] == "invalid_quote" and pd.isna(row["char_start"])
            continue
        s, e = int(row["char_start"]), int(row["char_end"])
        assert doc[s:e] == row["span_text"]
        assert ps <= s < e <= pe
        assert normalize(row["span_text"]) == normalize(cand["quote"]) or row["match"] == "exact"
    assert stats.invalid_quotes == judged["error"].eq("invalid_quote").sum()


# -- answer offsets -------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(texts, st.data())
def test_provided_claims_get_real_answer_offsets_or_none(answer, data):
    claims = []
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(answer) - 1))
        j = data.draw(st.integers(i + 1, len(answer)))
        claims.append(_mangle(answer[i:j], data.draw(st.integers(0, 3))))
    claims.append("a claim that is not in the answer at all ✗")
    for given_text, c in zip(claims, located_claims(answer, claims), strict=True):
        assert c.text == given_text
        if c.start is None:
            assert c.end is None
            continue
        assert 0 <= c.start < c.end <= len(answer)
        assert answer[c.start:c.end] == given_text or normalize(answer[c.start:c.end]) == normalize(given_text)


# -- a real evaluate run --------------------------------------------------------------------------

SENTENCES = [
    "The Zürich\u00a0plan costs 5\u00a0€ per month and includes 250\u00a0GB.",
    "Café re\u0301sume\u0301 backups run every night at 02:00 UTC.",
    "The 👩\u200d👩\u200d👧 family plan allows 6 members 👍🏽.",
    "東京リージョンの料金は月額500円です。",
    "Refunds are pro\u00adcessed within 30 days of the request.",
    "השירות זמין בכל ימות השבוע. الخدمة متاحة طوال الأسبوع.",
    "The “Pro” tier — launched in 2024 — has 99.9% uptime.",
    "Straße and ﬁle names with Ⅻ are accepted by the uploader.",
]


def _unicode_data(root: Path, seed: int = 7) -> tuple[Path, dict[str, str]]:
    rnd = random.Random(seed)
    glue = ["\r\n", "\n\n", " ", "\u00a0", "\u200b ", "\u200f ", " 🙂 "]
    docs = {}
    for k in range(6):
        picked = rnd.sample(SENTENCES, 4)
        accent = "é" if k % 2 else "e\u0301"  # the same-looking id, composed or not
        docs[f"docs/{k}-東京-{accent}.md"] = "".join(s + rnd.choice(glue) for s in picked)
    ids = list(docs)
    (root / "runs").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"doc_id": d, "text": t, "lang": "mixed"}, ensure_ascii=False) + "\n"
                                               for d, t in docs.items()), encoding="utf-8")
    questions, run = [], []
    for q in range(6):
        d1, d2 = rnd.sample(ids, 2)
        s1, s2 = rnd.sample(SENTENCES, 2)
        qid = f"q{q}"
        questions.append({"question_id": qid, "question": f"Question {q}?"})
        # answers: one sentence NFC-normalised with soft hyphens dropped (the normalised path),
        # one verbatim, one invented
        answer = " ".join([unicodedata.normalize("NFC", s1.replace("\u00ad", "")), s2,
                           "The moon is made of green cheese."])
        t1 = docs[d1]
        retrieved = [{"doc_id": d1, "char_start": 0, "char_end": len(t1)},
                     {"text": " \n".join(t1.split()[:3]), "doc_id": d1},  # re-wrapped text: recovered offsets
                     {"doc_id": d2, "char_start": 0, "char_end": len(docs[d2])}]
        run.append({"question_id": qid, "answer": answer, "retrieved": retrieved, "context_k": 2})
    (root / "questions.jsonl").write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in questions), encoding="utf-8")
    (root / "runs" / "u.jsonl").write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in run), encoding="utf-8")
    return root, docs


@pytest.mark.usefixtures("prefect_server")
def test_a_real_evaluate_on_hostile_unicode_writes_only_exact_spans(tmp_path, state_dir):
    from ragspan.flows.evaluate import evaluate

    data, docs = _unicode_data(tmp_path / "data")
    params = tmp_path / "params.yaml"
    params.write_text("chunking:\n  size: 60\n  overlap: 10\n", encoding="utf-8")
    out = tmp_path / "out"
    metrics = evaluate(data_dir=str(data), run="u", out_dir=str(out), params_path=str(params))
    spans = pd.read_parquet(out / "spans.parquet")
    diagnoses = pd.read_parquet(out / "diagnoses.parquet")
    claims = pd.read_parquet(out / "claims.parquet")
    assert metrics["claims"] == len(diagnoses) >= 12
    assert len(spans) >= 6, "the run found no evidence: the test proves nothing"
    for table in (spans, diagnoses.dropna(subset=["char_start"])):
        for d, s, e, t in zip(table["doc_id"], table["char_start"], table["char_end"], table["span_text"]):
            assert docs[d][int(s):int(e)] == t
        bs, be = utf8_spans(docs, table["doc_id"].tolist(), table["char_start"].tolist(), table["char_end"].tolist())
        for d, b0, b1, t in zip(table["doc_id"], bs, be, table["span_text"]):
            assert docs[d].encode("utf-8")[b0:b1] == t.encode("utf-8")
    # (the local judge quotes verbatim, so its matches are `exact`; the normalised path is
    # covered by test_validated_quotes_are_exact_document_slices above)
    assert set(spans["match"]) <= {"exact", "normalized"}
    answers = {json.loads(x)["question_id"]: json.loads(x)["answer"]
               for x in (data / "runs" / "u.jsonl").read_text(encoding="utf-8").splitlines()}
    located = claims.dropna(subset=["answer_start"])
    assert len(located) == len(claims)
    for q, s, e, c in zip(located["question_id"], located["answer_start"], located["answer_end"], located["claim"]):
        assert answers[q][int(s):int(e)] == c
    assert "The moon is made of green cheese." in set(diagnoses.loc[diagnoses["label"] == "hallucination", "claim"])
