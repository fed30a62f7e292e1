"""What a shard hands on: the tables its steps computed, assembled into one ShardResult.

Pure: the flow's shard chain (flows/shard.py) calls it with the steps' outputs and the
ledger's counters; the spans table is built here from every judgement the shard made
(retrieved passages, corpus hits, chunk windows)."""

from __future__ import annotations

from typing import Any

import pandas as pd
from ragspan.tasks.core.judging import JudgeStats
from ragspan.tasks.core.shards import ShardResult, answers_to_retry
from ragspan.tasks.steps.validate_offsets import spans_from_judgements


def shard_result(claims: pd.DataFrame, judged: pd.DataFrame, searched: pd.DataFrame, diagnosed: tuple,
                 stats: JudgeStats, states: dict[str, dict[str, int]], searching: frozenset[str] = frozenset(),
                 pre_search: Any = None, resumed: int = 0) -> ShardResult:
    """The shard's output tables, stats, task states and answers to retry.
    `diagnosed`: the last step's (diagnoses, answer spans[, judgements of its own: the
    window judgements that decided a chunk split, tasks/steps/boundary.py]).
    `searching`: the answers with a claim that went to corpus-wide search;
    `pre_search`: the retrieved-passage verdicts to store as their pre-search state;
    `resumed`: the answers whose chain started at corpus search."""
    diagnoses, answer_spans, *more = diagnosed
    both = pd.concat([judged, searched, *more], ignore_index=True)
    return ShardResult(claims, spans_from_judgements(both), diagnoses, stats, states,
                       answers_to_retry(claims, both), answer_spans, searching, pre_search, resumed)
