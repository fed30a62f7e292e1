"""The character-level answer metric: what share of the answers' text is supported,
unsupported, contradicted, or not checked at all.

Every non-space character of every answer falls in one class (tasks/core/answer_spans.py
`answer_char_counts`): inside a judged claim and not marked → `supported`; inside an
answer span → `unsupported` / `contradicted`; in no judged claim (text that is no claim,
an unjudged claim) → `not_checked`. Shares are of all answer characters, pooled over
the run (long answers weigh more, as they hold more text to trust); the 95 % intervals
resample questions, as the label rates do (tasks/reporting/stats.py). By metadata: an
answer counts under its question's metadata and its top retrieved document's.

    metrics["answer_chars"] = {"chars": {class: n}, "share": {class: x},
                               "ci95": {class: {"low", "high"}}, "by_metadata": {...}}
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from ragspan.tasks.core.answer_spans import CHAR_CLASSES, answer_char_counts
from ragspan.tasks.reporting.groups import claim_groups, group_order
from ragspan.tasks.reporting.stats import percentile_interval, resampled_sums


def char_counts_by_answer(answers: pd.DataFrame, diagnoses: pd.DataFrame,
                          answer_spans: pd.DataFrame) -> pd.DataFrame:
    """One row per answer (question_id) with its character count per class."""
    judged = diagnoses[(diagnoses["label"] != "unjudged") & diagnoses["answer_start"].notna()]
    claims: dict[str, list[tuple[int, int]]] = {}
    # .tolist() first: iterating an Arrow-backed column converts one value at a time
    for q, a, b in zip(judged["question_id"].tolist(), judged["answer_start"].tolist(), judged["answer_end"].tolist()):
        claims.setdefault(q, []).append((int(a), int(b)))
    marked: dict[str, list[tuple[int, int, str]]] = {}
    for q, a, b, k in zip(*(answer_spans[c].tolist() for c in ("question_id", "answer_start", "answer_end", "kind"))):
        marked.setdefault(q, []).append((int(a), int(b), k))
    rows = [{"question_id": q, **answer_char_counts(text, claims.get(q, []), marked.get(q, []))}
            for q, text in zip(answers["question_id"].tolist(), answers["answer"].tolist())]
    return pd.DataFrame(rows, columns=["question_id", *CHAR_CLASSES])


def _shares(counts: np.ndarray) -> dict[str, float | None]:
    total = counts.sum()
    return {c: (round(float(counts[i] / total), 4) if total else None) for i, c in enumerate(CHAR_CLASSES)}


def char_summary(per_answer: pd.DataFrame, intervals: bool = False) -> dict:
    """Counts, shares and (with `intervals`: bootstrap over these answers, in their
    order) 95 % intervals."""
    counts = per_answer[list(CHAR_CLASSES)].to_numpy(dtype=float)
    total = counts.sum(axis=0)
    out: dict = {"answers": len(per_answer), "chars": {c: int(total[i]) for i, c in enumerate(CHAR_CLASSES)},
                 "share": _shares(total)}
    if intervals:
        sums = resampled_sums(counts)  # (resamples × classes)
        all_chars = sums.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            shares = np.where(all_chars > 0, sums / np.where(all_chars > 0, all_chars, 1), np.nan)
        out["ci95"] = {}
        for i, c in enumerate(CHAR_CLASSES):
            low, high = percentile_interval(shares[:, i]) if len(counts) else (None, None)
            out["ci95"][c] = {"low": low, "high": high}
    return out


def answer_groups(answers: pd.DataFrame, corpus: pd.DataFrame, questions: pd.DataFrame | None,
                  retrieved: pd.DataFrame | None) -> pd.DataFrame:
    """Per answer, its metadata groups: the claim rule of groups.py applied to the answer
    as if it were one claim with no evidence (question metadata; the top retrieved doc's)."""
    stand_in = pd.DataFrame({"claim_id": answers["question_id"].to_numpy(),
                             "question_id": answers["question_id"].to_numpy(),
                             "doc_id": pd.Series([None] * len(answers), dtype=object)})
    return claim_groups(stand_in, corpus, questions, retrieved)


def answer_char_metrics(answers: pd.DataFrame, diagnoses: pd.DataFrame, answer_spans: pd.DataFrame,
                        corpus: pd.DataFrame, questions: pd.DataFrame | None,
                        retrieved: pd.DataFrame | None) -> dict:
    """metrics["answer_chars"] (see the module docstring)."""
    per_answer = char_counts_by_answer(answers, diagnoses, answer_spans).sort_values("question_id")
    out = char_summary(per_answer, intervals=True)
    groups = answer_groups(answers, corpus, questions, retrieved).set_index("claim_id")
    by: dict[str, dict] = {}
    for key in groups.columns:
        values = per_answer["question_id"].map(groups[key]).astype("object").to_numpy()
        by[key] = {g: char_summary(per_answer[values == g]) for g in group_order(groups[key])}
    out["by_metadata"] = {k: v for k, v in by.items() if v}
    return out
