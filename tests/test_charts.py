"""Charts (tasks/reporting/charts.py) and metadata groups (tasks/reporting/groups.py):
numeric metadata in numeric order and binned into ranges, each in-context rank its own bar
above the cutoff line, and PNG text in scripts the bundled font lacks (CJK) drawn as
glyphs with the font scripts/install-fonts installs."""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

import pandas as pd
from conftest import REPO
from ragspan.tasks.reporting import charts
from ragspan.tasks.reporting.groups import MAX_EXACT, N_BINS, claim_groups, group_order
from ragspan.tasks.reporting.report import breakdowns

CJK_FONT = Path("/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf")


def _claims(doc_values: list) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One claim per document; document i has metadata `n` = doc_values[i]."""
    docs = [f"d{i}" for i in range(len(doc_values))]
    diagnoses = pd.DataFrame({"claim_id": [f"c{i}" for i in range(len(docs))], "question_id": "q1",
                              "doc_id": docs, "label": "correct", "source_conflict": False})
    corpus = pd.DataFrame({"doc_id": docs, "text": "x", "n": doc_values})
    return diagnoses, corpus


def test_numeric_metadata_is_ordered_as_numbers_and_kept_exact_when_few():
    diagnoses, corpus = _claims(["1", "11", "12", "13", "2", "2", None])
    groups = claim_groups(diagnoses, corpus, None, None)
    assert group_order(groups["doc.n"]) == ["1", "2", "11", "12", "13", "(none)"]
    by = breakdowns(diagnoses, corpus, pd.DataFrame({"question_id": ["q1"]}), None)
    assert list(by["doc.n"]) == ["1", "2", "11", "12", "13", "(none)"]
    assert by["doc.n"]["2"]["correct"]["count"] == 2
    rows = [r.label for r in charts.metadata_chart({"labels": {"correct": {}}, "by_metadata": by}, ["doc.n"]).rows]
    assert rows == ["1", "2", "11", "12", "13", "(none)"]
    text, _ = _claims(["b", "a", "10", "9"])  # not all numbers: ordered as text
    assert group_order(claim_groups(text, _claims(["b", "a", "10", "9"])[1], None, None)["doc.n"]) == \
        ["10", "9", "a", "b"]


def test_numeric_metadata_past_a_handful_of_values_is_binned_into_ranges():
    values = [v for v in range(1, 41)] + [2.5, 100]  # 42 distinct values, ints and floats
    diagnoses, corpus = _claims(values)
    order = group_order(claim_groups(diagnoses, corpus, None, None)["doc.n"])
    assert MAX_EXACT < len(set(values)) and 2 <= len(order) <= N_BINS
    bounds = [tuple(float(x) for x in name.split("–")) for name in order]
    assert all(len(b) == 2 and b[0] < b[1] for b in bounds)  # every bin is a range lo–hi
    assert bounds[0][0] == 1 and bounds[-1][1] == 100
    assert all(a[1] < b[0] for a, b in itertools.pairwise(bounds))  # numeric order, no overlap
    by = breakdowns(diagnoses, corpus, pd.DataFrame({"question_id": ["q1"]}), None)["doc.n"]
    assert sum(v["correct"]["count"] for v in by.values()) == len(values)  # every claim in one bin
    inside = {name: sum(lo <= v <= hi for v in values) for name, (lo, hi) in zip(order, bounds)}
    assert inside == {name: by[name]["correct"]["count"] for name in order}


def test_each_in_context_rank_is_its_own_bar_above_the_cutoff():
    # q1: context of 3 (ranks 1-3), q2: context of 2; evidence at ranks 1, 3 (q1) and 2 (q2)
    # in context, at rank 4 of q1 (1 below its cutoff) and rank 4 of q2 (2 below).
    retrieved = pd.DataFrame({"question_id": ["q1"] * 4 + ["q2"] * 4, "rank": [1, 2, 3, 4] * 2,
                              "in_context": [True, True, True, False, True, True, False, False]})
    diagnoses = pd.DataFrame({
        "question_id": ["q1", "q1", "q2", "q1", "q2", "q2", "q1"],
        "label": ["correct", "correct", "correct", "rank_failure", "rank_failure", "hallucination", "unjudged"],
        "rank": pd.array([1, 3, 2, 4, 4, None, None], dtype="Int64")})
    pos = [(p.key, p.count) for p in charts.evidence_positions(diagnoses, retrieved)]
    assert pos == [("rank1", 1), ("rank2", 1), ("rank3", 1), ("offset+1", 1), ("offset+2", 1),
                   ("corpus", 0), ("none", 1)]
    rows = charts.rank_chart(charts.evidence_positions(diagnoses, retrieved)).rows
    cut = next(i for i, r in enumerate(rows) if r.rule)
    assert [r.label for r in rows[:cut]] == ["rank 1 (in context)", "rank 2 (in context)", "rank 3 (in context)"]
    assert rows[cut + 1].label == "1 rank below cutoff"


def ensure_cjk_font() -> None:
    """Install the CJK font with scripts/install-fonts when missing (never skip)."""
    if not CJK_FONT.exists():
        subprocess.run([str(REPO / "scripts" / "install-fonts")], check=True, timeout=600)
    assert CJK_FONT.exists(), f"{CJK_FONT} missing after scripts/install-fonts"
    charts.fallback_fonts.cache_clear()


def _png(label: str) -> bytes:
    return charts.to_png(charts.Chart("t", (charts.Row(label, (charts.Segment("x", 1, "#2e7d32"),), "1"),)))


def test_cjk_text_in_png_charts_is_drawn_as_glyphs():
    ensure_cjk_font()
    assert str(CJK_FONT) in charts.fallback_fonts()
    ((chunk, font),) = charts.font_runs("東京の文書")
    assert chunk == "東京の文書" and getattr(font, "path", None) == str(CJK_FONT)
    # As missing-glyph boxes, two different CJK strings (and a code point no font has)
    # draw the same picture; as glyphs they differ.
    tokyo, osaka, missing = _png("東京"), _png("大阪"), _png("\U0010FFFD\U0010FFFD")
    assert tokyo != osaka and tokyo != missing and osaka != missing
    # the measured width follows the glyphs: a CJK label is laid out wider than one char
    assert charts.text_width("東京東京") > 2 * charts.text_width("東京") * 0.9 > charts.text_width("東")
