"""Grouping claims by metadata: the one rule that report (`by_metadata`), the HTML
filters and compare (per-metadata deltas) all use.

A claim counts under the metadata of the document its deciding evidence came from, or,
when it has none (hallucinations, unjudged), the question's top retrieved document;
question metadata comes from the questions file. Columns that are text or identifiers
are skipped, and a column with more than MAX_GROUPS distinct values is an identifier,
not a group. A claim with no value is in the group `(none)`.
"""

from __future__ import annotations

import pandas as pd

MAX_GROUPS = 50
NONE_GROUP = "(none)"
SKIP_META = frozenset({"doc_id", "text", "title", "question_id", "question", "reference_answer"})


def attributed_docs(diagnoses: pd.DataFrame, retrieved: pd.DataFrame | None) -> pd.Series:
    """Per claim, the doc whose metadata it is grouped under (see module docstring)."""
    if retrieved is None:
        return diagnoses["doc_id"]
    top = retrieved.sort_values("rank").drop_duplicates("question_id").set_index("question_id")["doc_id"]
    fallback = diagnoses["question_id"].map(top)
    return diagnoses["doc_id"].where(diagnoses["doc_id"].notna(), fallback)


def claim_groups(diagnoses: pd.DataFrame, corpus: pd.DataFrame, questions: pd.DataFrame | None,
                 retrieved: pd.DataFrame | None) -> pd.DataFrame:
    """One row per claim (`claim_id`), one column per metadata key (`doc.doc_type`,
    `question.topic`, …) holding the claim's group as a string (`(none)` when missing);
    keys with more than MAX_GROUPS groups are left out."""
    out = pd.DataFrame({"claim_id": diagnoses["claim_id"].to_numpy()})
    docs = pd.Series(attributed_docs(diagnoses, retrieved).to_numpy())
    doc_meta = corpus.drop(columns=[c for c in corpus.columns if c in SKIP_META and c != "doc_id"]).set_index("doc_id")
    for col in doc_meta.columns:
        out[f"doc.{col}"] = docs.map(doc_meta[col]).to_numpy()
    if questions is not None:
        q_meta = questions.drop(columns=[c for c in questions.columns
                                         if c in SKIP_META and c != "question_id"]).set_index("question_id")
        for col in q_meta.columns:
            out[f"question.{col}"] = diagnoses["question_id"].map(q_meta[col]).to_numpy()
    for col in out.columns[1:]:
        out[col] = out[col].astype("string").fillna(NONE_GROUP)
    keep = ["claim_id"] + [c for c in out.columns[1:] if out[c].nunique() <= MAX_GROUPS]
    return out[keep]
