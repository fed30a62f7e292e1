"""The judge role: one Protocol, typed outcomes, and the spec that names a judge.

A judge answers two questions: how an answer splits into claims (`decompose`) and,
for one claim and several passages, whether each passage supports it and with which
exact words (`judge`). Failures are values (`JudgeFailure`), never exceptions that a
caller could swallow into a NaN: the diagnose step turns them into `unjudged`.

The value types a judge returns — verdict labels, failure kinds (drawn as a tree in
tasks/core/judging.py), `JudgeFailure`, `JudgeStats` — live in the core, below the rooms
that count and keep them; they are re-exported here for judges.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Literal, NamedTuple, Protocol

from pydantic import BaseModel, ConfigDict, Field
from ragspan.tasks.core.judging import (  # noqa: F401 (re-exported: the value types judges return)
    RETRYABLE_FAILURES,
    FailureKind,
    JudgeFailure,
    JudgeStats,
    VerdictLabel,
)


@dataclass(frozen=True)
class JudgeSpec:
    """Everything that changes a judge's answers; part of every cache key. Never holds
    a secret.

    A dataclass, not a pydantic model: Prefect hashes task inputs by pickling them
    together, and a pydantic instance pickles its `fields_set` — a set whose order
    changes between processes — so cache keys would never repeat across runs."""

    kind: Literal["local", "openai", "cascade"] = "local"
    model: str = "ragspan-lexical"
    base_url: str = ""
    prompt_version: str = "local-1"
    options: tuple[tuple[str, str], ...] = ()  # judge-specific knobs that change answers

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class JudgeRuntime:
    """Where and how a judge runs, never what it answers: the settings a step hands to the
    judge it builds (`make_judge(spec, runtime)`). The evaluate flow builds one from the
    run's settings and passes it through `evaluate_shard` to every judging step, so a
    judge on a Dask worker gets the same as one on a thread of the flow's process — a
    module variable set by the flow would exist in the flow's process only.

    Not part of any cache key (tasks/steps/cache_policy.py leaves the `runtime` input out):
    verdicts are the same with or without the verdict cache, in any number of processes,
    wherever the state dir is. Picklable (plain strings and ints) for the Dask workers.
    The default is a judge on its own: every pair judged, in this process, the openai
    judge's cache at its default path (unit tests, benchmarks)."""

    verdict_cache: str | None = None  # the local judge's verdict cache file; None: every pair is judged
    judge_cache: str | None = None  # the openai judge's cache file; None: its default (state dir)
    processes: int = 1  # worker processes a big local judge_many may use; 1 = in-process


class ClaimText(BaseModel):
    model_config = ConfigDict(frozen=True)

    text: str
    start: int | None = Field(None, ge=0)  # offsets into the answer, when located
    end: int | None = Field(None, ge=0)


MarkKind = Literal["unsupported", "contradicted"]


class ClaimMark(BaseModel):
    """Characters of a claim that a passage does not support: `unsupported` (the passage
    does not say it) or `contradicted` (the passage says something else, at
    `evidence_start:evidence_end` in the passage's own coordinates). Offsets are code
    points into the claim text; `claim[start:end]` is the marked text."""

    model_config = ConfigDict(frozen=True)

    start: int = Field(ge=0)
    end: int = Field(ge=0)
    kind: MarkKind
    evidence_start: int | None = Field(None, ge=0)
    evidence_end: int | None = Field(None, ge=0)


class Verdict(BaseModel):
    model_config = ConfigDict(frozen=True)

    verdict: VerdictLabel
    confidence: float = Field(ge=0, le=1)
    quote: str | None = None  # verbatim passage text (None for `unsupported`)
    quote_start: int | None = Field(None, ge=0)  # where the judge says the quote starts
    reason: str = ""
    # The judge's probability that this passage supports the claim (calibrated for the
    # local judge; derived from the model's stated confidence for an LLM judge).
    support: float | None = Field(None, ge=0, le=1)
    decided_by: str | None = None  # the judge kind that gave it (a cascade has two); None = the spec's
    # What of the claim this passage leaves unsupported or contradicts (answer spans).
    marks: tuple[ClaimMark, ...] = ()


class JudgeItem(NamedTuple):
    """One claim to judge against several passages, read as an answer to `question`: a
    short answer ("Delhi") asserts what it answers, and the words a claim only repeats
    from its question are not evidence."""

    claim: str
    passages: Sequence[str]
    question: str = ""
    whole_answer: bool = False  # the claim is the whole answer (e.g. "Delhi."), not a piece of one
    # per passage: it was in the answer's context window (what the generator was shown);
    # empty: unknown. The local judge reads a claim against those passages together.
    shown: Sequence[bool] = ()


class AnswerItem(NamedTuple):
    """One answer to split into claims, with the question it answers."""

    answer: str
    question: str = ""


def judge_items(items: Sequence[JudgeItem | tuple]) -> list[JudgeItem]:
    """Plain (claim, passages[, question]) tuples as JudgeItems."""
    return [i if isinstance(i, JudgeItem) else JudgeItem(*i) for i in items]


def answer_items(items: Sequence[AnswerItem | tuple | str]) -> list[AnswerItem]:
    """Answers (plain strings, or (answer, question) tuples) as AnswerItems."""
    return [i if isinstance(i, AnswerItem) else AnswerItem(i) if isinstance(i, str) else AnswerItem(*i)
            for i in items]


class Judge(Protocol):
    spec: JudgeSpec
    stats: JudgeStats  # calls, cache hits, tokens: counted by the judge itself

    def decompose(self, answer: str, question: str = "") -> list[ClaimText] | JudgeFailure: ...

    def judge(self, claim: str, passages: Sequence[str], question: str = "") -> list[Verdict | JudgeFailure]: ...

    # Batches: what the steps call, so a judge can run its calls concurrently.
    def decompose_many(self, items: Sequence[AnswerItem | tuple | str]) -> list[list[ClaimText] | JudgeFailure]: ...

    def judge_many(self, items: Sequence[JudgeItem | tuple]) -> list[list[Verdict | JudgeFailure]]: ...


# Who hears about judge calls as they happen (the CLI's progress display sets it; judges
# call `report_calls` — from any thread — and never import the flows layer).
_call_listener: Callable[[int], None] | None = None


def listen_to_calls(listener: Callable[[int], None] | None) -> Callable[[int], None] | None:
    """Install `listener` (None removes it); returns the one it replaces."""
    global _call_listener
    previous, _call_listener = _call_listener, listener
    return previous


def report_calls(n: int = 1) -> None:
    """For judges: `n` calls were just sent (cheap when nobody listens)."""
    listener = _call_listener
    if listener is not None:
        listener(n)
