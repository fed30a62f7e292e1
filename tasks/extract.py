"""extract: claims × passages → one judge verdict (with a quote) per pair.

The judge sees one claim with all its passages at once (the retrieved chunks of its
question in rank order, a claim's corpus-search hits, or the question's reference
answer), so a verdict always says which passage — never a blob of joined contexts.
"""

from __future__ import annotations

import pandas as pd

from ragspan.tasks import schemas
from ragspan.tasks.judges import make_judge
from ragspan.tasks.judges.base import Judge, JudgeFailure, JudgeSpec, JudgeStats
from ragspan.tasks.orchestration import step_task

_PASSAGE_COLUMNS = ("source", "chunk_id", "doc_id", "passage_start", "rank", "in_context", "score", "passage_text")


def passages_per_claim(claims: pd.DataFrame, passages: pd.DataFrame) -> list[tuple[dict, list[dict]]]:
    """Pairs each claim with its passages: per question, or per claim for search hits."""
    by_question: dict[str, list[dict]] = {}
    by_claim: dict[str, list[dict]] = {}
    for p in passages.sort_values(["question_id", "source", "rank"], kind="stable").to_dict("records"):
        if isinstance(p["claim_id"], str):
            by_claim.setdefault(p["claim_id"], []).append(p)
        else:
            by_question.setdefault(p["question_id"], []).append(p)
    out = []
    for c in claims.to_dict("records"):
        if isinstance(c["decompose_error"], str):
            continue  # the answer could not be split: nothing to judge, diagnose says unjudged
        mine = by_claim.get(c["claim_id"], []) + by_question.get(c["question_id"], [])
        if mine:
            out.append((c, mine))
    return out


def candidates_for_claims(claims: pd.DataFrame, passages: pd.DataFrame, judge: Judge) -> tuple[pd.DataFrame, JudgeStats]:
    rows: list[dict] = []
    stats = JudgeStats()
    work = passages_per_claim(claims, passages)
    verdict_lists = judge.judge_many([(c["claim"], [p["passage_text"] for p in mine]) for c, mine in work])
    for (claim, mine), verdicts in zip(work, verdict_lists, strict=True):
        for p, v in zip(mine, verdicts, strict=True):
            row = {"claim_id": claim["claim_id"], **{k: p[k] for k in _PASSAGE_COLUMNS}}
            if isinstance(v, JudgeFailure):
                stats += JudgeStats.failure(v.kind)
                row.update(verdict=None, confidence=None, quote=None, quote_start=None,
                           reason=v.detail, error=v.kind)
            else:
                row.update(verdict=v.verdict, confidence=v.confidence, quote=v.quote,
                           quote_start=v.quote_start, reason=v.reason, error=None)
            rows.append(row)
    return schemas.table(rows, schemas.Candidates), stats + judge.stats


@step_task("extract")
def extract(claims: pd.DataFrame, passages: pd.DataFrame, spec: JudgeSpec, code: str) -> tuple[pd.DataFrame, JudgeStats]:
    return candidates_for_claims(claims, passages, make_judge(spec))
