"""How many judge calls a run will make, before making any (`ragspan evaluate --dry-run`).

Claims are not known before decomposition, so their number is estimated with the local
judge's sentence splitter (exact for bring-your-own claims). Corpus-search calls are an
upper bound: only claims that nothing retrieved supports are searched.
"""

from __future__ import annotations

from math import ceil

from ragspan.tasks.config import Settings
from ragspan.tasks.judges.local import split_claims


def judge_call_estimate(answers, retrieved, questions, settings: Settings) -> dict[str, int | str]:
    # a cascade's LLM calls are at most those of the LLM judge alone
    per_call = settings.judge.max_passages_per_call if settings.judge.kind != "local" else 10**9
    retrieved_per_q = retrieved.groupby("question_id").size().to_dict()
    has_ref = set()
    if "reference_answer" in questions.columns:
        has_ref = set(questions.loc[questions["reference_answer"].notna(), "question_id"])
    decompose_calls = claims = extract_calls = 0
    for qid, answer, provided in zip(answers["question_id"], answers["answer"], answers["claims"]):
        if isinstance(provided, list):
            n = len(provided)
        else:
            decompose_calls += 1
            n = len(split_claims(answer))
        claims += n
        passages = retrieved_per_q.get(qid, 0) + (qid in has_ref)
        extract_calls += n * ceil(passages / per_call) if passages else 0
    search_calls = claims * ceil(settings.search.top_k / per_call) if settings.search.top_k else 0
    return {
        "judge": settings.judge.kind,
        "answers": len(answers),
        "decompose_calls": decompose_calls,
        "claims_estimated": claims,
        "extract_calls": extract_calls,
        "corpus_search_calls_at_most": search_calls,
        "total_at_most": decompose_calls + extract_calls + search_calls,
    }
