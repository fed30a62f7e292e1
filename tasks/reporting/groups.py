"""Grouping claims by metadata: the one rule that report (`by_metadata`), the HTML
filters and compare (per-metadata deltas) all use.

A claim counts under the metadata of the document its deciding evidence came from, or,
when it has none (hallucinations, unjudged), the question's top retrieved document;
question metadata comes from the questions file. Columns that are text or identifiers
are skipped, and a column with more than MAX_GROUPS distinct values is an identifier,
not a group. A claim with no value is in the group `(none)`.

A numeric column (every value a number, e.g. `header_lines`, `year`) is ordered as
numbers, not as text (1, 2, 11 — not 1, 11, 2); past MAX_EXACT distinct values it is
binned into at most N_BINS ranges of about equal numbers of claims, each named by the
smallest and largest value in it (`3–7`). The groups of a column come back as an ordered
categorical: `group_order` gives the order every consumer shows them in.
"""

from __future__ import annotations

import pandas as pd
from ragspan.tasks.core.among import among

MAX_GROUPS = 50
MAX_EXACT = 6  # a numeric column with more distinct values than this is binned
N_BINS = 5
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
    # The metadata of the documents claims are attributed to, not of the whole corpus: a
    # copy of every document's metadata and a lookup table over millions of doc_ids per
    # call cost the report most of its time at 10M chunks. The same values either way.
    cited = among(corpus["doc_id"], pd.unique(docs.dropna()))
    doc_meta = corpus.loc[cited, [c for c in corpus.columns if c not in SKIP_META or c == "doc_id"]].set_index("doc_id")
    for col in doc_meta.columns:
        out[f"doc.{col}"] = docs.map(doc_meta[col]).to_numpy()
    if questions is not None:
        q_meta = questions.drop(columns=[c for c in questions.columns
                                         if c in SKIP_META and c != "question_id"]).set_index("question_id")
        for col in q_meta.columns:
            out[f"question.{col}"] = diagnoses["question_id"].map(q_meta[col]).to_numpy()
    for col in out.columns[1:]:
        numeric = numeric_groups(out[col])
        out[col] = numeric if numeric is not None else out[col].astype("string").fillna(NONE_GROUP)
    keep = ["claim_id"] + [c for c in out.columns[1:] if out[c].nunique() <= MAX_GROUPS]
    return out[keep]


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def numeric_groups(values: pd.Series) -> pd.Series | None:
    """Groups of a numeric column as an ordered categorical (values, or ranges past
    MAX_EXACT distinct values; `(none)` last), or None when the column is not numeric."""
    present = values.dropna()
    if not len(present) or pd.api.types.is_bool_dtype(present) or present.map(
            lambda v: isinstance(v, bool)).any():
        return None
    numbers = pd.to_numeric(present.astype("string").str.strip(), errors="coerce")
    if numbers.isna().any():
        return None
    nums = pd.to_numeric(values.astype("string").str.strip(), errors="coerce")
    counts = numbers.value_counts().sort_index()
    if len(counts) <= MAX_EXACT:
        names = {v: _fmt(v) for v in counts.index}
    else:
        # equal-frequency bins over claims, cut between distinct values
        before = counts.cumsum().shift(fill_value=0) / counts.sum()
        bin_of = (before * N_BINS).astype(int).clip(upper=N_BINS - 1)
        names = {}
        for _, members in bin_of.groupby(bin_of):
            lo, hi = members.index.min(), members.index.max()
            name = _fmt(lo) if lo == hi else f"{_fmt(lo)}–{_fmt(hi)}"
            names.update({v: name for v in members.index})
    order = list(dict.fromkeys(names[v] for v in counts.index))
    labels = nums.map(names).astype("object").where(nums.notna(), NONE_GROUP)
    return pd.Series(pd.Categorical(labels, categories=order + [NONE_GROUP], ordered=True), index=values.index)


def group_order(groups: pd.Series) -> list[str]:
    """The groups present in one column of `claim_groups`, in the order to show them:
    numeric order for a numeric column, else sorted as text."""
    if isinstance(groups.dtype, pd.CategoricalDtype):
        present = set(groups.astype("object"))
        return [str(c) for c in groups.cat.categories if c in present]
    return sorted({str(v) for v in groups.tolist()})
