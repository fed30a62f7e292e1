"""Shards: batches of answers with exactly the passages their judge calls will read.

Each shard is self-contained (its answers, the retrieved chunks' texts, the reference
answers), so a task's cache key covers precisely what it judges: changing one answer
re-judges one shard, not the run.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd
from ragspan.tasks.core import schemas
from ragspan.tasks.judges.base import RETRYABLE_FAILURES, JudgeStats

if TYPE_CHECKING:
    from ragspan.tasks.io.load import Workspace


@dataclass(frozen=True)
class Shard:
    index: int
    answers: pd.DataFrame  # schemas.Answers
    passages: pd.DataFrame  # schemas.Passages: retrieved chunks + reference answers


@dataclass(frozen=True)
class ShardResult:
    """What one shard hands to the report: its output tables (claims, evidence spans,
    diagnoses), the judge stats of the steps that ran (not of cached ones), and the Prefect
    state names of its task runs. The judgements themselves — one row per (claim,
    passage), ten times the claims — stay in the shard (and in Prefect's result store), so
    the flow's memory grows with the outputs, not with the pairs judged."""

    claims: pd.DataFrame
    spans: pd.DataFrame
    diagnoses: pd.DataFrame
    stats: JudgeStats
    states: dict[str, dict[str, int]]
    # Answers (question ids) with a judge failure another attempt may not repeat (an
    # outage, a spent budget): never stored for reuse, so the next run tries them again.
    retry: frozenset[str] = frozenset()
    # schemas.AnswerSpans: the characters of the answers their evidence does not support
    # (None: none were computed — read as an empty table).
    answer_spans: pd.DataFrame | None = None
    # Answers (question ids) with a claim that went to corpus-wide search: their results
    # follow the whole corpus (BM25's statistics), so the answer store keys them by it.
    searched: frozenset[str] = frozenset()

    def answer_spans_table(self) -> pd.DataFrame:
        """The answer spans, an empty AnswerSpans table when there are none."""
        if self.answer_spans is not None:
            return self.answer_spans
        return schemas.table([], schemas.AnswerSpans, written=False)



def answers_to_retry(claims: pd.DataFrame, judgements: pd.DataFrame) -> frozenset[str]:
    """Question ids of answers with a judge failure that another attempt may not repeat."""
    failed = set(judgements.loc[judgements["error"].isin(RETRYABLE_FAILURES), "claim_id"])
    failed |= set(claims.loc[claims["decompose_error"].isin(RETRYABLE_FAILURES), "claim_id"])
    return frozenset(claims.loc[claims["claim_id"].isin(failed), "question_id"])


def passages_for(ws: Workspace, question_ids: Collection[str] | None = None) -> pd.DataFrame:
    """Every retrieved chunk with its text, plus each question's reference answer — of the
    questions in `question_ids` (None: of all). A question's rows are the same, in the same
    order, whichever others are asked with it: a shard's passages are built for its own
    answers (iter_shards), not cut from a table of every answer's."""
    retrieved, corpus, questions = ws.retrieved, ws.corpus, ws.questions
    if question_ids is not None:
        wanted = set(question_ids)
        retrieved = retrieved[retrieved["question_id"].isin(wanted)]
        questions = questions[questions["question_id"].isin(wanted)]
        corpus = corpus[corpus["doc_id"].isin(set(retrieved["doc_id"]))]  # only the texts these passages cut
    texts = dict(zip(corpus["doc_id"].tolist(), corpus["text"].tolist()))  # lists: Arrow strings iterate slowly
    r = retrieved.copy()
    r["passage_text"] = [texts[d][s:e] for d, s, e in zip(*(r[c].tolist() for c in ("doc_id", "char_start", "char_end")))]
    rows = pd.DataFrame({
        "question_id": r["question_id"], "claim_id": None, "source": "retrieved",
        "chunk_id": r["chunk_id"], "doc_id": r["doc_id"], "passage_start": r["char_start"],
        "rank": r["rank"], "in_context": r["in_context"], "score": r["score"],
        "passage_text": r["passage_text"],
    })
    if "reference_answer" in questions.columns:
        q = questions[questions["reference_answer"].notna() & (questions["reference_answer"].astype(str).str.strip() != "")]
        refs = pd.DataFrame({
            "question_id": q["question_id"], "claim_id": None, "source": "reference", "chunk_id": None,
            "doc_id": None, "passage_start": None, "rank": None, "in_context": False, "score": None,
            "passage_text": q["reference_answer"].astype(str),
        })
        rows = pd.concat([rows, refs], ignore_index=True) if not refs.empty else rows
    return schemas.Passages.validate(rows.reset_index(drop=True))


def iter_shards(answers: pd.DataFrame, ws: Workspace, shard_size: int) -> Iterator[Shard]:
    """Answers in input order, cut every `shard_size`; each shard's passages built for its
    answers (passages_for) as the shard is made. One shard at a time: a flow that submits
    them as workers free up holds a bounded number of shards' passages, never a table of
    every answer's passages (memory set by the shards in flight, not by the run's size)."""
    for i, start in enumerate(range(0, len(answers), shard_size)):
        part = answers.iloc[start : start + shard_size].reset_index(drop=True)
        yield Shard(index=i, answers=part, passages=passages_for(ws, part["question_id"].tolist()))


def shards_of(answers: pd.DataFrame, ws: Workspace, shard_size: int) -> list[Shard]:
    """Every shard of `iter_shards`, at once."""
    return list(iter_shards(answers, ws, shard_size))
