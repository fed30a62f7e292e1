"""decompose: answers → claims with their exact offsets in the answer.

A bring-your-own `claims` list skips the judge for that answer; each provided claim is
located in the answer (exact, then normalised) so its offsets are real or null.
"""

from __future__ import annotations

import pandas as pd
from ragspan.tasks.core import schemas
from ragspan.tasks.core.locate import locate_quote
from ragspan.tasks.judges import make_judge
from ragspan.tasks.judges.base import (
    ClaimText,
    Judge,
    JudgeFailure,
    JudgeRuntime,
    JudgeSpec,
    JudgeStats,
)
from ragspan.tasks.steps.cache_policy import step_task


def claim_id_for(question_id: str, index: int) -> str:
    return f"{question_id}:c{index}"


def located_claims(answer: str, provided: list[str]) -> list[ClaimText]:
    """Bring-your-own claims with answer offsets where the text can be found."""
    out = []
    for text in provided:
        hit = locate_quote(answer, text, None)
        out.append(ClaimText(text=text, start=hit[0], end=hit[1]) if hit else ClaimText(text=text))
    return out


def claims_for_answers(answers: pd.DataFrame, judge: Judge) -> tuple[pd.DataFrame, JudgeStats]:
    rows: list[dict] = []
    stats = JudgeStats()
    records = answers.to_dict("records")
    to_split = [(r["answer"], r["question"]) for r in records if not isinstance(r["claims"], list)]
    split = iter(judge.decompose_many(to_split))  # one batch: the judge may run it concurrently
    for rec in records:
        error = None
        if isinstance(rec["claims"], list):
            claims, origin = located_claims(rec["answer"], rec["claims"]), "provided"
        else:
            result, origin = next(split), "decomposed"
            if isinstance(result, JudgeFailure):
                # Keep the whole answer as one claim so it is reported as `unjudged`.
                stats += JudgeStats.failure(result.kind)
                claims, error = [ClaimText(text=rec["answer"], start=0, end=len(rec["answer"]))], result.kind
            else:
                claims = result
        rows.extend(
            {
                "run": rec["run"], "question_id": rec["question_id"],
                "claim_id": claim_id_for(rec["question_id"], i), "claim_index": i, "claim": c.text, "question": rec["question"],
                "answer_start": c.start, "answer_end": c.end, "origin": origin, "decompose_error": error,
            }
            for i, c in enumerate(claims)
        )
    return schemas.table(rows, schemas.Claims), stats + judge.stats


@step_task("decompose")
def decompose(answers: pd.DataFrame, spec: JudgeSpec, code: str,
              runtime: JudgeRuntime | None = None) -> tuple[pd.DataFrame, JudgeStats]:
    """`runtime`: as extract's (not in the step's cache key)."""
    return claims_for_answers(answers, make_judge(spec, runtime))
