"""Guarantee: a claim's probability of support and its `uncertain` flag say what its label
rests on — the best probability in each tier the label examined, against the threshold."""

from __future__ import annotations

import pandas as pd
import pytest
from ragspan.tasks.steps.diagnose import support_and_uncertainty, tier_support


def _judged(rows: list[tuple[str, str, bool, float | None]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["claim_id", "source", "in_context", "support"])


def test_tier_support_takes_the_best_probability_per_tier_and_ignores_references():
    judged = _judged([("c", "retrieved", True, 0.2), ("c", "retrieved", True, 0.4),
                      ("c", "retrieved", False, 0.9), ("c", "corpus", False, 0.1),
                      ("c", "reference", False, 0.99), ("d", "retrieved", True, None)])
    assert tier_support([judged]) == {"c": [0.4, 0.9, 0.1]}


@pytest.mark.parametrize(("label", "tiers", "uncertain"), [
    ("correct", [0.95, None, None], False),          # far above the threshold
    ("correct", [0.55, None, None], True),           # just above: it could as well be synthesis_error
    ("rank_failure", [0.45, 0.95, None], True),      # the context was just below: maybe correct
    ("rank_failure", [0.10, 0.95, None], False),
    ("hallucination", [0.05, 0.02, 0.58], True),     # a corpus hit almost supported it
    ("hallucination", [0.05, 0.02, 0.01], False),
    ("unjudged", [0.5, None, None], False),          # unjudged is its own flag
])
def test_uncertain_when_a_tier_the_label_rests_on_is_near_the_threshold(label, tiers, uncertain):
    probability, flagged = support_and_uncertainty(label, tiers, threshold=0.5, band=0.1)
    assert flagged is uncertain
    assert probability == max(p for p in tiers if p is not None)


def test_no_probability_no_uncertainty():
    assert support_and_uncertainty("hallucination", None, 0.5, 0.1) == (None, False)
    assert support_and_uncertainty("correct", [0.55, None, None], 0.5, 0.0) == (0.55, False)
