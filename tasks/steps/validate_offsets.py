"""validate_offsets: a judge's quote → exact raw document offsets, or a recorded failure.

No span that breaks `corpus[doc_id].text[char_start:char_end] == span_text` is ever
written: offsets are computed here from the passage text the judge actually saw
(`passage_start` + position in the passage), never taken from the judge.

Matching, in order: `exact` (the quote at the judge's own `quote_start`, else its
occurrence nearest to it), then `normalized` (tasks.core.text.normalize_with_map: NFKC,
casefold, quote/dash folding, zero-width and soft-hyphen removal, whitespace runs
collapsed) mapped back to raw offsets. A quote found neither way is an
`invalid_quote`: the verdict is dropped and counted, never silently kept.
"""

from __future__ import annotations

import pandas as pd
from ragspan.tasks.core import schemas
from ragspan.tasks.core.answer_spans import placed_evidence
from ragspan.tasks.core.locate import locate_quote
from ragspan.tasks.judges.base import JudgeStats
from ragspan.tasks.steps.cache_policy import step_task

_KEEP = ("claim_id", "source", "chunk_id", "doc_id", "rank", "in_context", "score", "verdict", "confidence",
         "support", "reason", "error", "decided_by")


def judgements_from_candidates(candidates: pd.DataFrame) -> tuple[pd.DataFrame, JudgeStats]:
    """Column-wise: only the rows with a quote to place (a supported/partial verdict on a
    document passage — a small share of all pairs) are visited one by one."""
    c = candidates.reset_index(drop=True)
    n = len(c)
    verdict, confidence = c["verdict"].astype(object).tolist(), c["confidence"].astype(object).tolist()
    support = c["support"].astype(object).tolist()
    # the marks' evidence, from passage to document coordinates (none without a document)
    marks = [placed_evidence(m, t, None if b is None else int(b))
             for m, t, b in zip(_objects(c["marks"]), _objects(c["passage_text"]), _objects(c["passage_start"]))]
    reason, error = c["reason"].astype(object).tolist(), c["error"].astype(object).tolist()
    char_start: list = [None] * n
    char_end: list = [None] * n
    span_text: list = [None] * n
    match: list = [None] * n
    invalid = 0
    need = (c["verdict"].notna() & (c["verdict"] != "unsupported") & c["quote"].notna()
            & (c["source"] != "reference") & c["passage_start"].notna()).to_numpy(dtype=bool)
    sub = c[need]
    for i, text, quote, qs, base in zip(sub.index, sub["passage_text"], sub["quote"], sub["quote_start"],
                                        sub["passage_start"]):
        hint = int(qs) if pd.notna(qs) else None
        found = locate_quote(text, quote, hint)
        if found is None:
            invalid += 1
            verdict[i], confidence[i], support[i], error[i], marks[i] = None, None, None, "invalid_quote", None
            reason[i] = f"quote not found in the passage: {quote[:80]!r}"
        else:
            s, e, how = found
            char_start[i], char_end[i], span_text[i], match[i] = int(base) + s, int(base) + e, text[s:e], how
    table = c[list(_KEEP)].copy()
    for k, values in (("verdict", verdict), ("confidence", confidence), ("support", support), ("reason", reason),
                      ("error", error),
                      ("char_start", char_start), ("char_end", char_end), ("span_text", span_text),
                      ("match", match), ("marks", marks)):
        table[k] = pd.Series(values, dtype=object)
    columns = list(schemas.Judgements.to_schema().columns)
    return schemas.Judgements.validate(table[columns]), JudgeStats(invalid_quotes=invalid)


def _objects(column: pd.Series) -> list:
    """Values with every missing one as None."""
    return [None if pd.isna(v) else v for v in column.astype(object).tolist()]


@step_task("validate-offsets")
def validate_offsets(candidates: pd.DataFrame, code: str) -> tuple[pd.DataFrame, JudgeStats]:
    return judgements_from_candidates(candidates)


def spans_from_judgements(judgements: pd.DataFrame) -> pd.DataFrame:
    """The evidence spans: judgements whose quote was placed in a document (byte offsets
    are added when the outputs are written)."""
    found = judgements[judgements["match"].notna() & (judgements["source"] != "reference")]
    cols = [c for c in schemas.Spans.to_schema().columns if c in found.columns]
    return schemas.Spans.validate(found[cols].reset_index(drop=True))
