"""validate_offsets: a judge's quote → exact raw document offsets, or a recorded failure.

No span that breaks `corpus[doc_id].text[char_start:char_end] == span_text` is ever
written: offsets are computed here from the passage text the judge actually saw
(`passage_start` + position in the passage), never taken from the judge.

Matching, in order: `exact` (the quote at the judge's own `quote_start`, else its
occurrence nearest to it), then `normalized` (tasks.text.normalize_with_map: NFKC,
casefold, quote/dash folding, zero-width and soft-hyphen removal, whitespace runs
collapsed) mapped back to raw offsets. A quote found neither way is an
`invalid_quote`: the verdict is dropped and counted, never silently kept.
"""

from __future__ import annotations

import pandas as pd

from ragspan.tasks import schemas
from ragspan.tasks.judges.base import JudgeStats
from ragspan.tasks.orchestration import step_task
from ragspan.tasks.text import locate_quote


def judgements_from_candidates(candidates: pd.DataFrame) -> tuple[pd.DataFrame, JudgeStats]:
    rows: list[dict] = []
    invalid = 0
    for c in candidates.to_dict("records"):
        row = {k: c[k] for k in ("claim_id", "source", "chunk_id", "doc_id", "rank", "in_context",
                                 "score", "verdict", "confidence", "reason", "error")}
        row.update(char_start=None, char_end=None, span_text=None, match=None)
        quote = c["quote"] if isinstance(c["quote"], str) else None
        has_doc = c["source"] != "reference" and pd.notna(c["passage_start"])
        if pd.notna(c["verdict"]) and c["verdict"] != "unsupported" and quote is not None and has_doc:
            hint = int(c["quote_start"]) if pd.notna(c["quote_start"]) else None
            found = locate_quote(c["passage_text"], quote, hint)
            if found is None:
                invalid += 1
                row.update(verdict=None, confidence=None, error="invalid_quote",
                           reason=f"quote not found in the passage: {quote[:80]!r}")
            else:
                s, e, match = found
                base = int(c["passage_start"])
                row.update(char_start=base + s, char_end=base + e,
                           span_text=c["passage_text"][s:e], match=match)
        rows.append(row)
    return schemas.table(rows, schemas.Judgements), JudgeStats(invalid_quotes=invalid)


@step_task("validate-offsets")
def validate_offsets(candidates: pd.DataFrame, code: str) -> tuple[pd.DataFrame, JudgeStats]:
    return judgements_from_candidates(candidates)
