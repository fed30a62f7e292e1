"""The chunker's share of failures: claims whose evidence a chunk boundary cut
(`chunk_split`, tasks/core/chunk_split.py) among the claims that failed, with a bootstrap
95% interval over questions (tasks/reporting/stats.py), overall and per metadata group.

A failure here is a judged claim with a failure label, or a split claim whatever its label:
a claim labelled `correct` on part of its evidence is still the chunker's failure, so it
counts in both the numerator and the denominator. metrics.json holds it under
`chunk_split` (`dvc metrics diff` sees `chunk_split.share` and its bounds).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from ragspan.tasks.core.taxonomy import FAILURE_LABELS, JUDGED_LABELS
from ragspan.tasks.reporting.groups import claim_groups, group_order
from ragspan.tasks.reporting.stats import percentile_interval, resampled_sums


def split_flags(diagnoses: pd.DataFrame) -> pd.Series:
    """Per claim, whether its evidence was cut (False for results written before issue 30)."""
    if "chunk_split" not in diagnoses.columns:
        return pd.Series(False, index=diagnoses.index)
    return diagnoses["chunk_split"].fillna(False).astype(bool)


def chunker_share(diagnoses: pd.DataFrame) -> dict:
    """{claims, failures, share, ci95: {low, high}, by_label} for one set of claims."""
    split = split_flags(diagnoses).to_numpy()
    judged = diagnoses["label"].isin(JUDGED_LABELS).to_numpy()
    failed = (diagnoses["label"].isin(FAILURE_LABELS).to_numpy() | split) & judged
    n_split, n_failed = int((split & judged).sum()), int(failed.sum())
    low, high = _interval(diagnoses["question_id"], split & judged, failed)
    labels = diagnoses.loc[split, "label"].value_counts()
    return {"claims": n_split, "failures": n_failed,
            "share": round(n_split / n_failed, 4) if n_failed else None,
            "ci95": {"low": low, "high": high},
            "by_label": {label: int(labels.get(label, 0)) for label in JUDGED_LABELS if labels.get(label, 0)}}


def _interval(questions: pd.Series, split: np.ndarray, failed: np.ndarray) -> tuple[float | None, float | None]:
    """Percentile bootstrap of split / failed, resampling questions (claims of one answer fail together)."""
    if not failed.any():
        return None, None
    codes, uniques = pd.factorize(questions, sort=True)
    per_q = np.zeros((len(uniques), 2))
    np.add.at(per_q, codes, np.column_stack([split, failed]).astype(float))
    # block by block: the whole (resamples × questions) matrix was 480 MB at 30k questions,
    # twice while concatenated; counts are integers, so the sums are the same bit for bit
    totals = resampled_sums(per_q)
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = np.where(totals[:, 1] > 0, totals[:, 0] / np.where(totals[:, 1] > 0, totals[:, 1], 1), np.nan)
    return percentile_interval(shares)


def chunk_split_metrics(diagnoses: pd.DataFrame, corpus: pd.DataFrame, questions: pd.DataFrame | None,
                        retrieved: pd.DataFrame | None) -> dict:
    """The run's chunker share, plus `by_metadata`: {key: {group: chunker_share}} (groups
    as reporting/groups.py draws them; a group without failures is left out)."""
    out = chunker_share(diagnoses)
    groups = claim_groups(diagnoses, corpus, questions, retrieved)
    by_meta: dict[str, dict] = {}
    for key in groups.columns[1:]:
        values = groups[key].astype("object").to_numpy()
        shares = {str(v): chunker_share(diagnoses[values == v]) for v in group_order(groups[key])}
        shares = {v: {k: s[k] for k in ("claims", "failures", "share", "ci95")} for v, s in shares.items()
                  if s["failures"]}
        if shares:
            by_meta[key] = shares
    out["by_metadata"] = by_meta
    return out


def chunker_line(metrics: dict) -> str | None:
    """One sentence for summary.md and the report, None when nothing was cut."""
    c = metrics.get("chunk_split") or {}
    if not c.get("claims"):
        return None
    ci = c.get("ci95") or {}
    interval = "" if ci.get("low") is None else f" (95% CI {ci['low']:.1%} – {ci['high']:.1%})"
    labels = ", ".join(f"{n} {label}" for label, n in (c.get("by_label") or {}).items())
    return (f"{c['claims']} claims had their evidence cut by a chunk boundary (`chunk_split`): "
            f"{c['share']:.1%} of failures{interval}; labelled {labels}. Stage to fix: chunking "
            "(boundaries, overlap).")


def cut_evidence_html(doc: str, s: int, e: int, split_at: int | None, escape: Callable[[str], str]) -> str:
    """doc[s:e], escaped, with the chunk boundary at `split_at` drawn where it falls inside
    (report.html's highlight of a cut claim's evidence)."""
    if split_at is None or not s < split_at < e:
        return escape(doc[s:e])
    return (f'{escape(doc[s:split_at])}<span class="cut" data-split-at="{split_at}" '
            f'title="chunk boundary at {split_at}"></span>{escape(doc[split_at:e])}')
