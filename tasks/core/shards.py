"""Shards: batches of answers with exactly the passages their judge calls will read.

Each shard is self-contained (its answers, the retrieved chunks' texts, the reference
answers), so a task's cache key covers precisely what it judges: changing one answer
re-judges one shard, not the run. A shard may also carry the pre-search state (PreSearch:
claims + verdicts on the retrieved passages) of some of its answers, stored by an earlier
run (tasks/reuse/pre_search.py): their chain starts at corpus-wide search, only the others go
through decompose and extract on retrieved passages (docs/decisions.md #58).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from ragspan.tasks.core import schemas
from ragspan.tasks.core.among import among
from ragspan.tasks.core.documents import texts_by_id
from ragspan.tasks.core.judging import RETRYABLE_FAILURES, JudgeStats

if TYPE_CHECKING:
    from ragspan.tasks.inputs.load import Workspace


@dataclass(frozen=True, eq=False)  # eq=False: it holds DataFrames
class PreSearch:
    """Answers' state before corpus-wide search: their claims (decompose) and the verdicts
    on their retrieved passages and reference answers (extract → validate offsets). It
    depends on the answer, its passages and the context alone, not on the rest of the corpus."""

    claims: pd.DataFrame  # schemas.Claims
    judged: pd.DataFrame  # schemas.Judgements

    @property
    def question_ids(self) -> frozenset[str]:
        return frozenset(self.claims["question_id"])


@dataclass(frozen=True)
class Shard:
    index: int
    answers: pd.DataFrame  # schemas.Answers
    passages: pd.DataFrame  # schemas.Passages: retrieved chunks + reference answers
    prior: PreSearch | None = None  # stored pre-search state of some of its answers

    def to_decompose(self) -> Shard:
        """The shard of the answers without a stored pre-search state (itself when none has
        one: a cold run's shards and their step cache keys are as they were)."""
        if self.prior is None:
            return self
        keep = self.prior.question_ids
        answers = self.answers[~among(self.answers["question_id"], keep)].reset_index(drop=True)
        passages = self.passages[~among(self.passages["question_id"], keep)].reset_index(drop=True)
        return Shard(self.index, answers, passages)

    def with_prior(self, claims: pd.DataFrame, judged: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The shard's claims and retrieved-passage verdicts: those just made for
        `to_decompose()`'s answers with the stored ones, grouped by answer in shard order
        (the order inside an answer kept) — as decompose and extract give them for the whole shard."""
        if self.prior is None:
            return claims, judged
        position = dict(zip(self.answers["question_id"], range(len(self.answers))))
        all_claims = _joined(self.prior.claims, claims)
        question_of = dict(zip(all_claims["claim_id"], all_claims["question_id"]))
        all_judged = _joined(self.prior.judged, judged)
        return (_by_answer(all_claims, all_claims["question_id"].map(position)),
                _by_answer(all_judged, all_judged["claim_id"].map(question_of).map(position)))

    def pre_search_to_store(self, claims: pd.DataFrame, judged: pd.DataFrame) -> pd.DataFrame:
        """The retrieved-passage verdicts worth storing: those of the answers whose pre-search
        state is not stored yet (the answers decomposed here)."""
        stored = self.prior.question_ids if self.prior is not None else frozenset()
        wanted = set(claims.loc[~among(claims["question_id"], stored), "claim_id"])
        return judged[among(judged["claim_id"], wanted)].reset_index(drop=True)


def _joined(stored: pd.DataFrame, made: pd.DataFrame) -> pd.DataFrame:
    """Both tables' rows; an empty one left out, so its dtypes (a step's empty table may
    have others) do not change the other's."""
    if not len(made) or not len(stored):
        return made if len(made) else stored
    return pd.concat([stored, made], ignore_index=True)


def _by_answer(table: pd.DataFrame, positions: pd.Series) -> pd.DataFrame:
    """`table`'s rows grouped by their answer's position, the order inside an answer kept."""
    return table.iloc[np.argsort(positions.to_numpy(), kind="stable")].reset_index(drop=True)


@dataclass(frozen=True)
class ShardResult:
    """What one shard hands to the report: its output tables (claims, evidence spans,
    diagnoses), the judge stats of the steps that ran (not of cached ones), and the Prefect
    state names of its task runs. The judgements themselves — one row per (claim,
    passage), ten times the claims — stay in the shard (and in Prefect's result store),
    but for the retrieved-passage verdicts of the answers that searched (`judged`), which
    go to disk with the shard's spill and on to the answer store as their pre-search state;
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
    # schemas.Judgements: the retrieved-passage verdicts of the answers decomposed here
    # (Shard.pre_search_to_store), kept as their pre-search state.
    judged: pd.DataFrame | None = None
    resumed: int = 0  # answers whose chain started at corpus-wide search (Shard.prior)

    def answer_spans_table(self) -> pd.DataFrame:
        """The answer spans, an empty AnswerSpans table when there are none."""
        if self.answer_spans is not None:
            return self.answer_spans
        return schemas.table([], schemas.AnswerSpans, written=False)



def answers_to_retry(claims: pd.DataFrame, judgements: pd.DataFrame) -> frozenset[str]:
    """Question ids of answers with a judge failure that another attempt may not repeat."""
    failed = set(judgements.loc[judgements["error"].isin(RETRYABLE_FAILURES), "claim_id"])
    failed |= set(claims.loc[claims["decompose_error"].isin(RETRYABLE_FAILURES), "claim_id"])
    return frozenset(claims.loc[among(claims["claim_id"], failed), "question_id"])


def passages_for(ws: Workspace, question_ids: Collection[str] | None = None) -> pd.DataFrame:
    """Every retrieved chunk with its text, plus each question's reference answer — of the
    questions in `question_ids` (None: of all). A question's rows are the same, in the same
    order, whichever others are asked with it: a shard's passages are built for its own
    answers (iter_shards), not cut from a table of every answer's."""
    retrieved, corpus, questions = ws.retrieved, ws.corpus, ws.questions
    if question_ids is not None:
        wanted = set(question_ids)
        retrieved = retrieved[among(retrieved["question_id"], wanted)]
        questions = questions[among(questions["question_id"], wanted)]
    # Only the texts these passages cut: every text as a Python string was the whole corpus
    # on the heap (5.2 GB of text at 10M chunks, kept resident by the allocator after).
    texts = texts_by_id(corpus, set(retrieved["doc_id"]))
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


def iter_shards(answers: pd.DataFrame, ws: Workspace, shard_size: int,
                prior_of: Callable[[list[str]], PreSearch | None] | None = None) -> Iterator[Shard]:
    """Answers in input order, cut every `shard_size`; each shard's passages built for its
    answers (passages_for) as the shard is made, and the stored pre-search state of those
    that have one (`prior_of`: question ids → PreSearch, or None). One shard at a time: a
    flow that submits them as workers free up holds a bounded number of shards' passages
    and prior states, never a table of every answer's (memory set by the shards in
    flight, not by the run's size)."""
    for i, start in enumerate(range(0, len(answers), shard_size)):
        part = answers.iloc[start : start + shard_size].reset_index(drop=True)
        ids = part["question_id"].tolist()
        yield Shard(index=i, answers=part, passages=passages_for(ws, ids),
                    prior=prior_of(ids) if prior_of is not None else None)


def shards_of(answers: pd.DataFrame, ws: Workspace, shard_size: int) -> list[Shard]:
    """Every shard of `iter_shards`, at once."""
    return list(iter_shards(answers, ws, shard_size))
