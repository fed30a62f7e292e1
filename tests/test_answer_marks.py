"""Answer spans (issue 21): which characters of a claim the passage leaves unsupported or
contradicts — exact offsets on any text, one behaviour per test."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ragspan.tasks.judges.base import JudgeSpec, Verdict
from ragspan.tasks.judges.local import LocalJudge
from ragspan.tasks.judges.verifier import CONFLICTS
from ragspan.tasks.judges.verifier.features import pair_features
from ragspan.tasks.judges.verifier.marks import claim_marks
from ragspan.tasks.judges.verifier.profiles import claim_profile

PASSAGE = (
    "Northwind Cloud was founded in 2014 in Lisbon. Customers can request a full refund "
    "within 30 days of purchase. Refunds are not available for reserved instances. "
    "The Pro plan costs $49 per month and 5% more in Europe."
)


@pytest.fixture(scope="module")
def judge() -> LocalJudge:
    return LocalJudge(JudgeSpec())


def judged(judge: LocalJudge, claim: str, passage: str = PASSAGE, question: str = "",
           whole: bool = False) -> Verdict:
    (v,) = judge.judge(claim, [passage], question, whole)
    assert isinstance(v, Verdict)
    return v


def shown(claim: str, v: Verdict, passage: str = PASSAGE) -> list[tuple[str, str, str | None]]:
    """(marked claim text, kind, the passage's evidence text)."""
    return [(claim[m.start:m.end], m.kind,
             passage[m.evidence_start:m.evidence_end] if m.evidence_start is not None else None) for m in v.marks]


# ------------------------------------------------------------------ offsets always valid
def assert_valid(claim: str, marks, passage: str) -> None:
    last = 0
    for s, e, kind, es, ee in marks:
        assert last <= s < e <= len(claim), (claim, marks)  # sorted, non-overlapping, non-empty
        last = e
        text = claim[s:e]
        assert text == text.strip() and text.strip(), (claim, marks)
        assert re.match(r"\w", text), (claim, marks)  # never starts on punctuation
        tail = text[-1]
        assert re.match(r"\w", tail) or unicodedata.combining(tail) or tail == "%", (claim, marks)
        if kind == "contradicted":
            assert es is not None and ee is not None and 0 <= es < ee <= len(passage)
            assert passage[es:ee].strip() == passage[es:ee]
        else:
            assert kind == "unsupported" and es is None and ee is None


ATOMS = [
    "a", "the", "not", "no", "Refund", "refunds", "Lisbon", "Porto", "30", "60", "days", "weeks", "5%", "%",
    "word", "é", "e\u0301", "Zu\u0308rich", "Zürich", "👩‍👩‍👧", "東京", "שלום", " ", "  ", "\r\n", "\n", "\t", ".",
    ",", ";", "(", ")", "“", "”", "’", "—", "-", "\u00a0", "\u00ad", "$49", "1,200", "U.S.", "isn't", "Yes", "No",
]
words = st.lists(st.sampled_from(ATOMS), min_size=1, max_size=30)


@given(words, st.data())
def test_marks_are_exact_sorted_disjoint_and_trimmed_on_any_text(claim_atoms, data):
    claim = " ".join(claim_atoms)
    # the passage: the claim's atoms, some dropped or swapped, plus others (a window exists)
    kept = [a for a in claim_atoms if data.draw(st.booleans())]
    passage = " ".join(kept + data.draw(words)) + ". " + " ".join(data.draw(words))
    question = data.draw(st.sampled_from(["", "Where is the refund?", "Is Lisbon not 30 days?"]))
    whole = data.draw(st.booleans())
    profile = claim_profile(claim, question, whole)
    if profile is None:
        return
    r = pair_features(profile, passage)
    # every conflict path at once: marks hold even where a conflict finds nothing to mark
    assert_valid(claim, claim_marks(profile, r, tuple(CONFLICTS)), passage)
    assert_valid(claim, claim_marks(profile, r, ()), passage)
    (v,) = LocalJudge(JudgeSpec()).judge(claim, [passage], question, whole)
    if isinstance(v, Verdict):
        assert_valid(claim, [(m.start, m.end, m.kind, m.evidence_start, m.evidence_end) for m in v.marks], passage)


def test_crlf_and_combining_marks_keep_offsets_exact(judge):
    passage = "The office in Zurich opened in 2014 with twelve engineers.\r\nIt grew fast."
    claim = "The office in Zurich opened in 2014 with twelve engineers led by Rene\u0301\r\nas director."
    v = judged(judge, claim, passage)
    assert_valid(claim, [(m.start, m.end, m.kind, m.evidence_start, m.evidence_end) for m in v.marks], passage)
    # one phrase across the line break; the accent stays with its letter
    assert shown(claim, v, passage) == [("led by Rene\u0301\r\nas director", "unsupported", None)]


# ------------------------------------------------------------------------ contradictions
@pytest.mark.parametrize(
    "claim, word, evidence",
    [
        ("Customers can request a full refund within 60 days of purchase.", "60", "30"),
        ("Northwind Cloud was founded in 2014 in Porto.", "Porto", "Lisbon"),
        ("Customers can request a full refund within 30 weeks of purchase.", "weeks", "days"),
        ("Refunds are available for reserved instances.", "available", "not"),
        ("Customers cannot request a full refund within 30 days of purchase.", "cannot", "request"),
    ],
    ids=["number", "name", "unit", "negation-removed", "negation-added"],
)
def test_a_changed_word_is_contradicted_with_the_passage_word_as_evidence(judge, claim, word, evidence):
    v = judged(judge, claim)
    assert v.verdict == "partial"
    assert shown(claim, v) == [(word, "contradicted", evidence)]


def test_a_changed_percentage_marks_the_figure_with_its_sign():
    passage = "Prices rose by 5 points in Europe last year."
    claim = "Prices rose by 5% in Europe last year."
    profile = claim_profile(claim)
    marks = claim_marks(profile, pair_features(profile, passage), ("unit_conflict",))
    assert [(claim[s:e], k, passage[es:ee]) for s, e, k, es, ee in marks] == [("5%", "contradicted", "points")]


# ---------------------------------------------------------------------------- unsupported
def test_a_missing_phrase_is_one_unsupported_mark(judge):
    claim = "Customers can request a full refund within 30 days of purchase from the CEO by phone."
    v = judged(judge, claim)
    # (with its article: people mark the phrase "the CEO", as WiCE's annotators do)
    assert shown(claim, v) == [("the CEO by phone", "unsupported", None)]


def test_a_fully_supported_claim_has_no_marks(judge):
    v = judged(judge, "Customers can request a full refund within 30 days of purchase.")
    assert v.verdict == "supported" and v.marks == ()


def test_an_unrelated_passage_gives_no_marks(judge):
    # (short-circuited: the passage holds too little of the claim to be segmented)
    v = judged(judge, "Northwind offers a free GPU tier for students.")
    assert v.verdict == "unsupported" and v.marks == ()


def test_an_unsupported_verdict_about_the_claim_marks_what_is_missing(judge):
    claim = "Northwind Cloud was founded by three engineers from Madrid who later sold it to Oracle."
    v = judged(judge, claim)
    assert v.verdict == "unsupported" and v.quote is None
    assert shown(claim, v) == [("three engineers from Madrid who later sold it to Oracle", "unsupported", None)]


def test_a_word_from_the_question_is_never_marked(judge):
    question = "Which Northwind plan includes priority support?"
    # Neither "priority support" nor "a dedicated manager in Madrid" is in the passage;
    # only what the question did not already say is the answer's own claim to mark.
    claim = "The Pro plan includes priority support and a dedicated manager in Madrid."
    v = judged(judge, claim, question=question)
    assert v.marks, "no marks at all: the test would pass without checking anything"
    marked = " ".join(claim[m.start:m.end] for m in v.marks)
    assert "Madrid" in marked
    assert "priority" not in marked and "support" not in marked and "includes" not in marked


# ------------------------------------------------------------------ short and polar answers
def test_yes_to_a_statement_the_passage_negates_marks_the_yes(judge):
    v = judged(judge, "Yes.", question="Are refunds available for reserved instances?", whole=True)
    assert v.verdict == "partial"
    assert shown("Yes.", v) == [("Yes", "contradicted", "not")]


def test_no_to_a_statement_the_passage_negates_has_no_marks(judge):
    v = judged(judge, "No.", question="Are refunds available for reserved instances?", whole=True)
    assert v.verdict == "supported" and v.marks == ()


def test_yes_to_a_statement_only_partly_in_the_passage_marks_the_yes(judge):
    question = "Can customers request a full refund within 30 days of purchase in cash?"
    v = judged(judge, "Yes.", question=question, whole=True)
    if v.verdict != "unsupported":
        assert shown("Yes.", v) == [("Yes", "unsupported", None)]


def test_a_one_word_answer_marks_only_its_own_word(judge):
    question = "Where was Northwind Cloud founded?"
    v = judged(judge, "Porto.", question=question, whole=True)
    assert shown("Porto.", v) == [("Porto", "contradicted", "Lisbon")]
    assert judged(judge, "Lisbon.", question=question, whole=True).marks == ()
