"""Which questions report.html's drill-down draws, and their rows of each table.

Beyond a limit (html.MAX_DRILLDOWN_QUESTIONS) the page shows the questions with the most
failures; only those questions' rows are then turned into Python dicts for the cards.
"""

from __future__ import annotations

import pandas as pd
from ragspan.tasks.core.among import among


def shown_questions(diagnoses: pd.DataFrame, limit: int) -> tuple[list[str], str]:
    """The question ids the drill-down draws, sorted, and the note saying what it leaves
    out: every question, or beyond `limit` those with the most failures
    (a page with every claim of a 10k-question run weighs ~100 MB; diagnoses.parquet has
    them all)."""
    failures: dict[str, int] = {}
    for q, label in zip(diagnoses["question_id"].tolist(), diagnoses["label"].tolist()):
        failures[q] = failures.get(q, 0) + (label not in ("correct", "unjudged"))
    shown = sorted(failures)
    if len(shown) <= limit:
        return shown, ""
    shown = sorted(sorted(shown, key=lambda q: -failures[q])[:limit])
    return shown, (f'<p class="note">Showing the {limit:,} of {len(failures):,} questions with '
                   f'the most failures; every claim is in <code>diagnoses.parquet</code>.</p>')


def rows_of(table: pd.DataFrame, shown: list[str], diagnoses: pd.DataFrame) -> pd.DataFrame:
    """The rows of `table` that belong to the shown questions (by question_id, or for
    spans by claim_id through `diagnoses`), in their order."""
    if "question_id" in table.columns:
        return table[among(table["question_id"], shown)]
    claims = diagnoses.loc[among(diagnoses["question_id"], shown), "claim_id"]
    return table[among(table["claim_id"], claims)]
