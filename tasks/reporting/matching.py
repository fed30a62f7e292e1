"""Which claim of one evaluation is which claim of another, and how its label moved.

One matching for every report that sets two evaluations of the same questions side by
side — `ragspan compare` (tasks/reporting/compare.py) and the rebuild section of a run
(tasks/reporting/rebuild.py) — so that the two never tell different transitions for the
same two results (docs/decisions.md #41):

- `matched_claims`: a claim of A is the claim of B with the same question, the same text
  up to whitespace, and the same repeat index (the n-th occurrence of a text in an answer
  matches the n-th). Claim ids are positions in the answer: a claim added or dropped
  before it renumbers the rest, so ids cannot say which claim is which;
- `transition_matrix` / `transitions`: matched claims counted by (label in A, label in B);
- `direction`: whether a transition is better, worse, the same, or into or out of
  `unjudged` (a judge failure, neither better nor worse), along the taxonomy's order.
"""

from __future__ import annotations

import re

import pandas as pd
from ragspan.tasks.core.taxonomy import LABELS, rank_of

# The diagnoses columns the matching reads: a reader of diagnoses.parquet needs no more.
MATCH_COLUMNS: list[str] = ["question_id", "claim_id", "claim", "label"]


def normalised_claim_text(text: object) -> str:
    """The claim text with runs of whitespace made one space and the ends stripped."""
    return re.sub(r"\s+", " ", str(text)).strip()


def matched_claims(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, int, int]:
    """Claims present in both (question_id + normalised claim text + repeat index);
    returns (matched rows with question_id, claim_id_a, claim_id_b, claim (A's text),
    label_a, label_b; count only in A; count only in B)."""
    def keyed(d: pd.DataFrame) -> pd.DataFrame:
        k = d[MATCH_COLUMNS].copy()
        k["_text"] = k["claim"].map(normalised_claim_text)
        k["_n"] = k.groupby(["question_id", "_text"]).cumcount()
        return k

    ka, kb = keyed(a), keyed(b)
    m = ka.merge(kb, on=["question_id", "_text", "_n"], how="outer", suffixes=("_a", "_b"), indicator=True)
    both = m[m["_merge"] == "both"]
    matched = pd.DataFrame({
        "question_id": both["question_id"].to_numpy(), "claim_id_a": both["claim_id_a"].to_numpy(),
        "claim_id_b": both["claim_id_b"].to_numpy(), "claim": both["claim_a"].to_numpy(),
        "label_a": both["label_a"].to_numpy(), "label_b": both["label_b"].to_numpy(),
    })
    return (matched.sort_values(["question_id", "claim_id_a"]).reset_index(drop=True),
            int((m["_merge"] == "left_only").sum()), int((m["_merge"] == "right_only").sum()))


def transition_matrix(matched: pd.DataFrame) -> pd.DataFrame:
    """Counts of matched claims by label in A (rows) and label in B (columns)."""
    labels = list(LABELS)
    table = pd.crosstab(matched["label_a"], matched["label_b"]) if len(matched) else pd.DataFrame()
    return table.reindex(index=labels, columns=labels, fill_value=0).astype(int).rename_axis(
        index="A", columns="B")


def transitions(matrix: pd.DataFrame) -> list[dict]:
    """The off-diagonal cells, largest first: `14 rank_failure → correct`."""
    cells = [{"from": f, "to": t, "count": int(matrix.loc[f, t])}
             for f in matrix.index for t in matrix.columns if f != t and matrix.loc[f, t]]
    return sorted(cells, key=lambda c: (-c["count"], c["from"], c["to"]))


def transition_name(label_from: str, label_to: str) -> str:
    """How a transition is written in every report: `rank_failure → correct`."""
    return f"{label_from} → {label_to}"


def direction(label_from: str, label_to: str) -> str:
    """"same", "unjudged" (into or out of it), "worse" (down the taxonomy's order) or "better"."""
    if label_from == label_to:
        return "same"
    if "unjudged" in (label_from, label_to):
        return "unjudged"
    return "worse" if rank_of(label_to) > rank_of(label_from) else "better"
