"""extract: claims × passages → one judge verdict (with a quote) per pair.

The judge sees one claim with all its passages at once (the retrieved chunks of its
question in rank order, a claim's corpus-search hits, or the question's reference
answer), so a verdict always says which passage — never a blob of joined contexts.
"""

from __future__ import annotations

import pandas as pd
from ragspan.tasks.core import schemas
from ragspan.tasks.core.answer_spans import marks_json
from ragspan.tasks.judges import make_judge
from ragspan.tasks.judges.base import (
    Judge,
    JudgeFailure,
    JudgeItem,
    JudgeRuntime,
    JudgeSpec,
    JudgeStats,
)
from ragspan.tasks.steps.cache_policy import step_task

_PASSAGE_COLUMNS = ("source", "chunk_id", "doc_id", "passage_start", "rank", "in_context", "score", "passage_text")


def passages_per_claim(claims: pd.DataFrame, passages: pd.DataFrame) -> list[tuple[dict, list[int]]]:
    """Pairs each claim with its passages (row positions in `passages`): per question, or
    per claim for search hits; claim hits first, each group in (source, rank) order."""
    by_question: dict[str, list[int]] = {}
    by_claim: dict[str, list[int]] = {}
    order = passages.sort_values(["question_id", "source", "rank"], kind="stable").index
    positions = passages.index.get_indexer(order)
    for pos, qid, cid in zip(positions, passages["question_id"].to_numpy()[positions],
                             passages["claim_id"].to_numpy()[positions]):
        if isinstance(cid, str):
            by_claim.setdefault(cid, []).append(int(pos))
        else:
            by_question.setdefault(qid, []).append(int(pos))
    out = []
    for c in claims[["claim_id", "question_id", "claim", "question", "decompose_error"]].to_dict("records"):
        if isinstance(c["decompose_error"], str):
            continue  # the answer could not be split: nothing to judge, diagnose says unjudged
        mine = by_claim.get(c["claim_id"], []) + by_question.get(c["question_id"], [])
        if mine:
            out.append((c, mine))
    return out


def candidates_for_claims(claims: pd.DataFrame, passages: pd.DataFrame, judge: Judge) -> tuple[pd.DataFrame, JudgeStats]:
    """One row per (claim, passage), built column-wise: the passage columns are taken from
    `passages` by position, the verdict columns from the judge's answers."""
    stats = JudgeStats()
    passages = passages.reset_index(drop=True)
    work = passages_per_claim(claims, passages)
    texts = passages["passage_text"].tolist()
    per_answer = claims["question_id"].value_counts()
    # what the generator was shown: its retrieved chunks inside the context window
    shown = ((passages["source"] == "retrieved") & passages["in_context"].astype(bool)).tolist()
    verdict_lists = judge.judge_many([JudgeItem(c["claim"], [texts[i] for i in mine], c["question"],
                                                bool(per_answer.get(c["question_id"], 0) == 1),
                                                [shown[i] for i in mine])
                                      for c, mine in work])
    take: list[int] = []
    fields = ("verdict", "confidence", "support", "quote", "quote_start", "reason", "error", "decided_by", "marks")
    kind = judge.spec.kind
    cols: dict[str, list] = {k: [] for k in ("claim_id", *fields)}
    for (claim, mine), verdicts in zip(work, verdict_lists, strict=True):
        if len(mine) != len(verdicts):
            raise ValueError(f"judge returned {len(verdicts)} verdicts for {len(mine)} passages")
        take.extend(mine)
        cols["claim_id"].extend([claim["claim_id"]] * len(mine))
        for v in verdicts:
            if isinstance(v, JudgeFailure):
                stats += JudgeStats.failure(v.kind)
                row = (None, None, None, None, None, v.detail, v.kind, v.decided_by or kind, None)
            else:
                marks = marks_json((m.start, m.end, m.kind, m.evidence_start, m.evidence_end) for m in v.marks)
                row = (v.verdict, v.confidence, v.support, v.quote, v.quote_start, v.reason, None,
                       v.decided_by or kind, marks)
            for k, x in zip(fields, row):
                cols[k].append(x)
    table = passages.iloc[take][list(_PASSAGE_COLUMNS)].reset_index(drop=True)
    for k, values in cols.items():
        table[k] = pd.Series(values, dtype=object)
    # validate_offsets needs the passage only where there is a quote to place; most pairs
    # are `unsupported`, and carrying every passage made each shard's cached result (and
    # its cache key for the next step) hundreds of MB at scale.
    table["passage_text"] = table["passage_text"].where(table["quote"].notna(), None)
    columns = list(schemas.Candidates.to_schema().columns)
    return schemas.Candidates.validate(table[columns]), stats + judge.stats


@step_task("extract")
def extract(claims: pd.DataFrame, passages: pd.DataFrame, spec: JudgeSpec, code: str,
            runtime: JudgeRuntime | None = None) -> tuple[pd.DataFrame, JudgeStats]:
    """`runtime`: where the judge's caches are and how many processes it may use (not in
    the step's cache key: it changes no verdict)."""
    return candidates_for_claims(claims, passages, make_judge(spec, runtime))
