"""Answer spans: which characters of an answer its evidence does not support.

The pure placing of judge marks in the answer (offsets exact by construction, also for
claims a judge rewrote), the character metric, the gate rule, and the whole pipeline on
the bundled sample: answer_spans.parquet, its byte offsets, `ragspan explain`."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import unicodedata
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from ragspan.tasks.core import schemas
from ragspan.tasks.core.answer_spans import (
    answer_char_counts,
    answer_spans_of_claim,
    marks_json,
    parse_marks,
    placed_evidence,
)
from ragspan.tasks.reporting.gate import GateRuleError, gate_failures, parse_rules

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "data" / "sample"

# Letters, digits, combining marks, astral emoji, CR/LF and spaces: every way an offset
# can drift between code points, bytes and normalised text.
TEXT = st.text(alphabet=st.sampled_from(list("ab Zé\u0301\u0308x9\r\n\t,.") + ["\U0001F600", "ß", "İ", "ﬁ"]),
               min_size=0, max_size=60)


@st.composite
def answer_with_marks(draw):
    before, claim, after = draw(TEXT), draw(TEXT.filter(lambda t: t.strip() != "")), draw(TEXT)
    answer = before + claim + after
    marks = []
    for _ in range(draw(st.integers(0, 4))):
        s = draw(st.integers(0, len(claim) - 1))
        e = draw(st.integers(s + 1, len(claim)))
        kind = draw(st.sampled_from(["unsupported", "contradicted"]))
        marks.append((s, e, kind, 3, 7, "evid") if kind == "contradicted" else (s, e, kind, None, None, None))
    return answer, claim, len(before), len(before) + len(claim), marks


@given(answer_with_marks())
def test_spans_are_exact_sorted_disjoint_slices_of_the_claim(case):
    answer, claim, a0, a1, marks = case
    spans = answer_spans_of_claim(answer, claim, a0, a1, marks, "doc")
    for x in spans:
        assert answer[x["answer_start"]:x["answer_end"]] == x["text"] != ""
        assert a0 <= x["answer_start"] < x["answer_end"] <= a1
        # never edge space or punctuation
        assert unicodedata.category(x["text"][0])[0] not in "PZC" and unicodedata.category(x["text"][-1])[0] not in "PZC"
        assert (x["kind"] == "contradicted") == (x["doc_id"] is not None)
    ends = [(x["answer_start"], x["answer_end"]) for x in spans]
    assert ends == sorted(ends) and all(b[0] >= a[1] for a, b in itertools.pairwise(ends))


@given(st.text(alphabet=st.sampled_from(list("ab é\u0301x\r\n")), min_size=1, max_size=40))
def test_a_rewritten_claim_marks_only_words_the_answer_holds(words):
    """A judge that rewrote the claim ("The price is X" for "X"): marked words are found
    in the claim's stretch of the answer, or dropped — never placed by position alone."""
    answer = f"Intro. {words} tail."
    a0, a1 = 7, 7 + len(words)
    claim = f"It says {words}"
    marks = [(8, len(claim), "unsupported", None, None, None)]
    for x in answer_spans_of_claim(answer, claim, a0, a1, marks, None):
        assert answer[x["answer_start"]:x["answer_end"]] == x["text"]
        assert a0 <= x["answer_start"] and x["answer_end"] <= a1


def test_contradiction_wins_where_marks_overlap_and_keeps_its_evidence():
    answer = "It opened in 1998 in Paris."
    spans = answer_spans_of_claim(answer, answer, 0, len(answer),
                                  [(0, 26, "unsupported", None, None, None), (13, 17, "contradicted", 40, 44, "1999")],
                                  "history.md")
    assert [(x["text"], x["kind"]) for x in spans] == [("It opened in", "unsupported"), ("1998", "contradicted"),
                                                      ("in Paris", "unsupported")]
    assert spans[1]["evidence_text"] == "1999" and (spans[1]["char_start"], spans[1]["char_end"]) == (40, 44)


def test_a_contradiction_without_evidence_is_shown_as_unsupported():
    spans = answer_spans_of_claim("Born 1998.", "Born 1998.", 0, 10, [(5, 9, "contradicted", None, None, None)], "d")
    assert [(x["text"], x["kind"], x["doc_id"]) for x in spans] == [("1998", "unsupported", None)]


def test_marks_move_from_passage_to_document_coordinates_with_their_text():
    passage = "The museum opened in 1999."
    moved = parse_marks(placed_evidence(marks_json([(0, 4, "contradicted", 21, 25)]), passage, 100))
    assert moved == [(0, 4, "contradicted", 121, 125, "1999")]
    # evidence outside the passage, or no document: dropped, the mark kept
    assert parse_marks(placed_evidence(marks_json([(0, 4, "contradicted", 21, 99)]), passage, 100))[0][3:] == (
        None, None, None)
    assert marks_json([]) is None and parse_marks(None) == []


def test_every_non_space_character_is_counted_once():
    answer = "Alpha beta. Gamma delta!  Not a claim."
    counts = answer_char_counts(answer, [(0, 11), (12, 24)], [(6, 10, "unsupported"), (18, 23, "contradicted")])
    assert counts == {"supported": 5 + 1 + 5 + 1, "unsupported": 4, "contradicted": 5,
                      "not_checked": len("Notaclaim.")}
    assert sum(counts.values()) == sum(not c.isspace() for c in answer)


def test_gate_rule_on_answer_characters():
    rules = parse_rules(["unsupported-chars:2pp"])
    worse = {"answer_chars": {"unsupported_or_contradicted": {"a": 0.10, "b": 0.13, "delta": 0.03}}}
    better = {"answer_chars": {"unsupported_or_contradicted": {"a": 0.10, "b": 0.11, "delta": 0.01}}}
    assert gate_failures(worse, rules) and "10.0% → 13.0%" in gate_failures(worse, rules)[0]
    assert gate_failures(better, rules) == []
    assert "re-run both" in gate_failures({}, rules)[0]  # results from before the metric: said, not passed
    with pytest.raises(GateRuleError):
        parse_rules(["unsupported-chars:two"])


# --------------------------------------------------------------------------- the pipeline


@pytest.fixture(scope="module")
def sample_results(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("answer-spans") / "baseline"
    r = subprocess.run([sys.executable, "-m", "ragspan.flows.cli", "evaluate", "--data", str(SAMPLE), "--run",
                        "baseline", "--out", str(out), "--quiet"], check=False, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    return out


def _answers() -> dict[str, str]:
    rows = [json.loads(line) for line in (SAMPLE / "runs" / "baseline.jsonl").read_text(
        encoding="utf-8").splitlines() if line.strip()]
    return {r["question_id"]: r["answer"] for r in rows}


def test_sample_answer_spans_are_exact_in_code_points_and_bytes(sample_results):
    spans = schemas.AnswerSpans.validate(pd.read_parquet(sample_results / "answer_spans.parquet"))
    answers = _answers()
    assert len(spans)
    for r in spans.to_dict("records"):
        answer = answers[r["question_id"]]
        assert answer[r["answer_start"]:r["answer_end"]] == r["text"]
        raw = answer.encode("utf-8")
        assert raw[r["answer_byte_start"]:r["answer_byte_end"]].decode("utf-8") == r["text"]
    docs = [json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    corpus = {d["doc_id"]: d["text"] for d in docs}
    for r in spans[spans["kind"] == "contradicted"].to_dict("records"):
        assert corpus[r["doc_id"]][r["char_start"]:r["char_end"]] == r["evidence_text"]
        raw = corpus[r["doc_id"]].encode("utf-8")
        assert raw[r["byte_start"]:r["byte_end"]].decode("utf-8") == r["evidence_text"]
    # the sample shows both kinds
    assert set(spans["kind"]) == {"unsupported", "contradicted"}


def test_sample_diagnoses_count_the_unsupported_characters(sample_results):
    d = pd.read_parquet(sample_results / "diagnoses.parquet")
    spans = pd.read_parquet(sample_results / "answer_spans.parquet")
    per_claim = (spans["answer_end"] - spans["answer_start"]).groupby(spans["claim_id"]).sum()
    judged = d[d["label"] != "unjudged"]
    expected = judged["claim_id"].map(per_claim).fillna(0).astype(int)
    assert (judged["unsupported_chars"].astype(int).to_numpy() == expected.to_numpy()).all()
    assert d.loc[d["label"] == "unjudged", "unsupported_chars"].isna().all()
    # every failed claim located in its answer has some characters marked
    failed = judged[judged["label"].isin(["synthesis_error", "hallucination"])]
    assert (failed["unsupported_chars"] > 0).all()
    metrics = json.loads((sample_results / "metrics.json").read_text(encoding="utf-8"))
    share = metrics["answer_chars"]["share"]
    assert abs(sum(share.values()) - 1) < 1e-3 and share["unsupported"] > 0
    ci = metrics["answer_chars"]["ci95"]["unsupported"]
    assert ci["low"] <= share["unsupported"] <= ci["high"]
    full = json.loads((sample_results / "answer_chars.json").read_text(encoding="utf-8"))
    assert full["by_metadata"] and sum(full["chars"].values()) > 0


def test_explain_prints_the_answer_with_its_marks(sample_results):
    spans = pd.read_parquet(sample_results / "answer_spans.parquet")
    qid = spans["question_id"].iloc[0]
    r = subprocess.run([sys.executable, "-m", "ragspan.flows.cli", "explain", str(sample_results), qid,
                        "--color", "never"], check=False, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    first = spans[spans["question_id"] == qid].iloc[0]
    sign = "[?" if first["kind"] == "unsupported" else "[!"
    flat = " ".join(r.stdout.split())
    assert f"{sign}{' '.join(first['text'].split())}" in flat
    assert "not supported:" in r.stdout


def test_a_correct_claim_writes_no_answer_span_even_when_uncertain():
    """Issue 41: a correct-but-uncertain claim's doubt is its `uncertain` flag, never an
    `unsupported` answer span."""
    from ragspan.tasks.steps.diagnose import answer_spans_for

    answer = "Paris is the capital of France."
    claim = {"question_id": "q", "claim": answer, "answer_start": 0, "answer_end": len(answer)}
    d = {"label": "correct", "uncertain": True, "marks_from": True, "marks": "[[0,5,\"unsupported\",null,null]]",
         "marks_doc": "d"}
    assert answer_spans_for(claim, d, {"q": answer}) == []
    assert answer_spans_for(claim, {**d, "label": "synthesis_error"}, {"q": answer})[0]["kind"] == "unsupported"
