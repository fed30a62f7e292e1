"""The verifier's conflict detectors and its core-feature path (tasks/judges/verifier/)."""

from __future__ import annotations

import pytest
from ragspan.tasks.judges.base import JudgeSpec, Verdict
from ragspan.tasks.judges.local import LocalJudge
from ragspan.tasks.judges.verifier import verifier
from ragspan.tasks.judges.verifier.conflicts import NEGATION, NUMBER, Clash
from ragspan.tasks.judges.verifier.features import CORE_FEATURES, FEATURES, pair_features
from ragspan.tasks.judges.verifier.profiles import claim_profile

PASSAGE = (
    "Northwind Cloud was founded in 2014 in Lisbon. Customers can request a full refund "
    "within 30 days of purchase. Refunds are not available for reserved instances. "
    "The Pro plan costs $49 per month and 5% more in Europe."
)
CLAIMS = [
    ("", "Customers can request a full refund within 60 days of purchase."),
    ("", "Northwind Cloud was founded in 2014 in Porto."),
    ("", "Customers can request a full refund within 30 weeks of purchase."),
    ("", "Refunds are available for reserved instances."),
    ("When was Northwind founded?", "2014."),
    ("Are refunds available for reserved instances?", "Yes."),
    ("", "The Pro plan costs $49 per month."),
    ("", "Lisbon has a harbour and many bridges."),
]


@pytest.mark.parametrize("question, claim", CLAIMS)
def test_the_core_path_computes_the_core_features_as_the_full_one(question, claim):
    profile = claim_profile(claim, question, True)
    full, core = pair_features(profile, PASSAGE), pair_features(profile, PASSAGE, full=False)
    at = [k for k, f in enumerate(FEATURES) if f in CORE_FEATURES]
    assert [core.features[k] for k in at] == [full.features[k] for k in at]
    assert (core.quote_start, core.quote_end, core.window, core.fit, core.clashes) == \
           (full.quote_start, full.quote_end, full.window, full.fit, full.clashes)
    # the judge's model and rules read nothing else
    assert set(verifier().model.features) <= CORE_FEATURES


def test_a_changed_number_is_located_in_the_claim_and_the_window():
    claim = "Customers can request a full refund within 60 days of purchase."
    r = pair_features(claim_profile(claim), PASSAGE)
    (clash,) = [c for c in r.clashes if c.kind == NUMBER]
    assert claim[slice(*clash.claim)] == "60" and PASSAGE[slice(*clash.window)] == "30"
    assert r.features[FEATURES.index(NUMBER)] == 1.0


def test_a_rule_that_no_answer_word_shows_still_counts_but_marks_nothing():
    # The window negates "available", which the claim takes from its question: the claim
    # contradicts the window, but "available" is the question's word, never marked.
    question, claim = "Are refunds available for reserved instances?", "Refunds are available for reserved instances."
    r = pair_features(claim_profile(claim, question, False), PASSAGE)
    assert r.clashes == (Clash(NEGATION, None, None),)
    assert r.features[FEATURES.index("neg_conflict")] == 1.0
    (v,) = LocalJudge(JudgeSpec()).judge(claim, [PASSAGE], question, False)
    assert isinstance(v, Verdict) and v.verdict == "partial"
    assert not [m for m in v.marks if m.kind == "contradicted"]
