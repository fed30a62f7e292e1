"""What judging produces, as values: verdict labels, failure kinds, a failure, the counters.

These are the judge role's value types (tasks/judges/base.py is the role itself: the
Protocol, the spec, the items). They sit in the core so that the rooms which count and
keep them — shards, the answer store, spilled shards, the manifest — need not import a judge.

A judge answers two questions: how an answer splits into claims (`decompose`) and,
for one claim and several passages, whether each passage supports it and with which
exact words (`judge`). Failures are values (`JudgeFailure`), never exceptions that a
caller could swallow into a NaN: the diagnose step turns them into `unjudged`.

    JudgeFailure.kind
    ├── no_content        the claim has no words to check (local judge)
    ├── refusal           the model refused
    ├── truncated         finish_reason == "length"
    ├── unparseable       output did not validate against the schema
    ├── invalid_quote     the quote was not in the passage, even after one re-ask
    ├── http_error        429/5xx/timeout/connection after all retries
    ├── rejected          the server refused the request as invalid (not retried; a hint
    │                     names the setting to change)
    └── budget_exhausted  the run's call/token budget was spent before this call
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

VerdictLabel = Literal["supported", "partial", "unsupported"]
FailureKind = Literal[
    "no_content", "refusal", "truncated", "unparseable", "invalid_quote", "http_error",
    "budget_exhausted", "rejected",
]


# Failures that another attempt may not repeat: a re-run retries their steps even when
# Prefect has them cached (flows/ledger.py). The others are properties of the input.
# A rejection is deterministic for one request, but the server may be fixed or restarted
# with other options between runs, so a re-run asks again.
RETRYABLE_FAILURES: frozenset[str] = frozenset({"http_error", "budget_exhausted", "rejected"})


class JudgeFailure(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: FailureKind
    detail: str = ""
    decided_by: str | None = None


class JudgeStats(BaseModel):
    """Counters a step returns next to its table; summed into metrics.json."""

    calls: int = 0
    cache_hits: int = 0
    errors: int = 0
    retryable_errors: int = 0  # errors of a RETRYABLE_FAILURES kind
    invalid_quotes: int = 0
    invalid_marks: int = 0  # words an LLM judge marked unsupported that are not in the claim (dropped)
    failed_calls: int = 0  # requests sent that ended without a usable reply (LLM judges)
    prompt_tokens: int = 0
    # local judge: (claim, passage) pairs judged by the model, verdicts reused from the
    # verdict cache, reused pairs judged again alone for the marks they now win
    # (tasks/judges/verdict_cache.py), and pairs whose verdict needed no model (decided in
    # bulk: too few of the claim's words in the passage; never stored)
    pairs_judged: int = 0
    verdicts_reused: int = 0
    marks_rejudged: int = 0
    pairs_decided: int = 0
    completion_tokens: int = 0
    # cascade judge: claims sent to the LLM, claims the local judge decided alone, and the
    # LLM calls those would have taken
    routed: int = 0
    not_routed: int = 0
    calls_saved: int = 0

    def __add__(self, other: JudgeStats) -> JudgeStats:
        return JudgeStats(**{k: getattr(self, k) + getattr(other, k) for k in type(self).model_fields})

    @classmethod
    def failure(cls, kind: str) -> JudgeStats:
        """The count of one judge failure of `kind`."""
        return cls(errors=1, retryable_errors=int(kind in RETRYABLE_FAILURES))
