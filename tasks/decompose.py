"""decompose: answers → claims with their exact offsets in the answer.

A bring-your-own `claims` list skips the judge for that answer; each provided claim is
located in the answer (exact, then normalised) so its offsets are real or null.
"""

from __future__ import annotations

import pandas as pd

from ragspan.tasks import schemas
from ragspan.tasks.judges import make_judge
from ragspan.tasks.judges.base import ClaimText, JudgeFailure, JudgeSpec, JudgeStats
from ragspan.tasks.orchestration import step_task
from ragspan.tasks.validate_offsets import locate_quote


def claim_id_for(question_id: str, index: int) -> str:
    return f"{question_id}:c{index}"


def located_claims(answer: str, provided: list[str]) -> list[ClaimText]:
    """Bring-your-own claims with answer offsets where the text can be found."""
    out = []
    for text in provided:
        hit = locate_quote(answer, text, None)
        out.append(ClaimText(text=text, start=hit[0], end=hit[1]) if hit else ClaimText(text=text))
    return out


def claims_for_answers(answers: pd.DataFrame, judge) -> tuple[pd.DataFrame, JudgeStats]:
    rows: list[dict] = []
    stats = JudgeStats()
    for rec in answers.itertuples(index=False):
        provided = rec.claims if isinstance(rec.claims, list) else None
        error = None
        if provided is not None:
            claims, origin = located_claims(rec.answer, provided), "provided"
        else:
            result = judge.decompose(rec.answer)
            origin = "decomposed"
            if isinstance(result, JudgeFailure):
                # Keep the whole answer as one claim so it is reported as `unjudged`.
                stats += JudgeStats(errors=1)
                claims, error = [ClaimText(text=rec.answer, start=0, end=len(rec.answer))], result.kind
            else:
                claims = result
        for i, c in enumerate(claims):
            rows.append(
                {
                    "run": rec.run,
                    "question_id": rec.question_id,
                    "claim_id": claim_id_for(rec.question_id, i),
                    "claim_index": i,
                    "claim": c.text,
                    "answer_start": c.start,
                    "answer_end": c.end,
                    "origin": origin,
                    "decompose_error": error,
                }
            )
    return schemas.table(rows, schemas.Claims), stats + judge.stats


@step_task("decompose")
def decompose(answers: pd.DataFrame, spec: JudgeSpec, code: str) -> tuple[pd.DataFrame, JudgeStats]:
    return claims_for_answers(answers, make_judge(spec))
