"""The OpenAI-compatible judge: any Chat Completions endpoint with `json_schema` output
(OpenAI, Azure OpenAI v1, vLLM, llama.cpp `llama-server`, Ollama), behind the Judge
Protocol, with the judge cache in front of every model call.

One model call is one chat completion asking for the output schema of one of the
pydantic models of tasks/judges/openai_messages.py, in the best structured-output mode the server takes
(tasks/judges/output_modes.py: json_schema → json_object with the schema → json_object →
prompt; negotiated on the first rejection and remembered per endpoint + model). The
field descriptions are instructions the model sees (prompts: tasks/judges/prompts/*.md,
versioned). The output is validated with pydantic whatever the server claims.

- decompose(answer): one call → claims, each with the verbatim answer text it comes
  from; answer offsets via `locate_quote` (exact, then normalised), null when absent.
- judge(claim, passages): one call per claim and up to `max_passages_per_call`
  numbered passages → a verdict, a verbatim quote and a confidence per passage.
  Each quote is checked with `locate_quote` against the passage sent; a quote that is
  not there (or a missing verdict) gets one re-ask naming what was wrong; still wrong →
  JudgeFailure(invalid_quote). `judge_many(items)` runs many claims' calls on a thread
  pool of `max_concurrency`.

Outcomes of a call (never an exception out of decompose/judge):

    model call
    ├── cache hit ................................... parsed value (no request)
    ├── budget spent (max_calls / max_tokens) ....... JudgeFailure(budget_exhausted)
    ├── 429 / 5xx / 408 / timeout / connection ...... retried: exponential backoff with
    │                                                 jitter, Retry-After honoured; after
    │                                                 max_retries → JudgeFailure(http_error)
    ├── rejected: other 4xx, or a 5xx whose body is a request-validation error
    │   ├── about the output format (auto mode) ..... the next mode, at once
    │   └── otherwise ............................... JudgeFailure(rejected) with a hint,
    │                                                 no retry; after max_rejections
    │                                                 identical ones in a row, later calls
    │                                                 are not sent (same failure)
    ├── message.refusal / content_filter ............ JudgeFailure(refusal)
    ├── finish_reason == "length" ................... JudgeFailure(truncated)
    ├── not JSON / fails the schema ................. JudgeFailure(unparseable)
    └── parsed ...................................... stored in the cache, returned

`self.stats.calls` counts HTTP requests sent (retries and re-asks included) — the same
number the server sees and the budget limits; cache hits are `cache_hits`. Failures are
counted per verdict by the calling step (`errors`), not here; `self.failures` keeps the
per-kind tally and `self.retries` the retried attempts.

The API key is read from the environment only (`judge.api_key_env`, else
RAGSPAN_JUDGE_API_KEY, else OPENAI_API_KEY); it is never a cache-key part, stored, logged
or put in a failure detail (details are redacted). Loopback endpoints need no key.

This module wires the parts: openai_options.py (settings, key, spec), openai_messages.py
(output models, messages per mode), openai_transport.py (requests, retry/rejection,
backoff, budget), openai_replies.py (parsing, validation, quote checks).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel
from ragspan.tasks.judges.base import (
    AnswerItem,
    ClaimText,
    JudgeFailure,
    JudgeItem,
    JudgeRuntime,
    JudgeSpec,
    JudgeStats,
    Verdict,
    answer_items,
    judge_items,
    report_calls,
)
from ragspan.tasks.judges.cache import JudgeCache, cache_key, endpoint_label
from ragspan.tasks.judges.openai_messages import (
    SCHEMA_VERSION,
    DecomposedClaim,
    Decomposition,
    Extraction,
    PassageVerdict,
    decompose_choices,
    decompose_messages,
    extract_choices,
    extract_messages,
    messages_for,
    reask_messages,
    schema_fingerprint,
)
from ragspan.tasks.judges.openai_options import (
    DEFAULT_BASE_URL,
    KEY_ENV_FALLBACKS,
    NO_KEY,
    OpenAIOptions,
    api_key_for,
    estimated_cost,
    openai_spec,
)
from ragspan.tasks.judges.openai_replies import (
    Reply,
    ReplyFailed,
    cached_value,
    checked_verdicts,
    claims_of,
    json_object_reply,
    reask_outcome,
    still_wrong,
    structured_reply,
    tokens,
)
from ragspan.tasks.judges.openai_transport import Rejection, Retry, backoff, budget_for, send
from ragspan.tasks.judges.openai_transport import retry_after as _retry_after
from ragspan.tasks.judges.output_modes import (
    AUTO,
    MODES,
    RejectionStreak,
    hint_for,
    is_about_output_format,
    mode_state,
)
from ragspan.tasks.judges.prompts import Prompt, load_prompt

# Names other modules and tests import from here (their homes are the modules above).
__all__ = ["DEFAULT_BASE_URL", "SCHEMA_VERSION", "DecomposedClaim", "Decomposition", "Extraction", "OpenAIJudge",
           "OpenAIOptions", "PassageVerdict", "_retry_after", "api_key_for", "estimated_cost", "openai_spec",
           "schema_fingerprint"]

log = logging.getLogger("ragspan.judge")

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class _FormatRejected:
    """A call whose output mode the server rejected: try the next mode."""

    status: int
    detail: str


class OpenAIJudge:
    """The Judge Protocol over an OpenAI-compatible endpoint (see the module docstring)."""

    def __init__(self, spec: JudgeSpec, *, cache: JudgeCache | bool | None = True,
                 runtime: JudgeRuntime | None = None) -> None:
        """`cache`: True, the judge cache of `runtime.judge_cache` (None there: the state
        dir's) when `judge.cache` is on; a JudgeCache; or False/None for none."""
        if spec.kind != "openai":
            raise ValueError(f"OpenAIJudge needs an openai spec, got {spec.kind!r}")
        self.spec = spec
        self.options = OpenAIOptions.from_spec(spec)
        self.stats = JudgeStats()
        self.failures: Counter[str] = Counter()
        self.retries = 0
        self._lock = threading.Lock()
        self._endpoint = endpoint_label(spec.base_url or DEFAULT_BASE_URL)
        self._schema = schema_fingerprint()
        self._prompts = {p: load_prompt(p) for p in ("decompose", "extract")}
        if cache is True:
            cache = JudgeCache((runtime or JudgeRuntime()).judge_cache) if self.options.cache else None
        self.cache: JudgeCache | None = cache if isinstance(cache, JudgeCache) else None
        self._budget = budget_for(spec, self.options)
        key = api_key_for(self.options, spec.base_url or DEFAULT_BASE_URL)
        if key is None:
            raise RuntimeError("the openai judge needs an API key in the environment: set "
                               + (self.options.api_key_env or " or ".join(KEY_ENV_FALLBACKS)))
        self._secrets = tuple(s for s in (key,) if s and s != NO_KEY)
        import openai

        self._openai = openai
        self._client = openai.OpenAI(base_url=spec.base_url or DEFAULT_BASE_URL, api_key=key,
                                     max_retries=0, timeout=self.options.timeout_s)
        if self.options.response_format not in (AUTO, *MODES):
            raise ValueError(f"judge.response_format must be {AUTO} or one of {', '.join(MODES)}, "
                             f"got {self.options.response_format!r}")
        store = self.cache
        self._modes = mode_state(
            self._endpoint, spec.model, self.options.response_format,
            recall=(lambda: store.output_mode(self._endpoint, spec.model)) if store is not None else (lambda: None),
            remember=(lambda mode, why: store.remember_output_mode(self._endpoint, spec.model, mode, why))
            if store is not None else None)
        self._streak = RejectionStreak(self.options.max_rejections)

    @property
    def output_mode(self) -> str:
        """The structured-output mode calls are made in now (output_modes.MODES)."""
        return self._modes.current

    # -- Protocol ------------------------------------------------------------------------

    def decompose(self, answer: str, question: str = "") -> list[ClaimText] | JudgeFailure:
        return self.decompose_many([AnswerItem(answer, question)])[0]

    def decompose_many(self, items: Sequence[AnswerItem | tuple | str]) -> list[list[ClaimText] | JudgeFailure]:
        return self._map(lambda a: self._decompose_one(a.answer, a.question), answer_items(items))

    def judge(self, claim: str, passages: Sequence[str], question: str = "") -> list[Verdict | JudgeFailure]:
        return self.judge_many([JudgeItem(claim, passages, question)])[0]

    def judge_many(self, items: Sequence[JudgeItem | tuple]) -> list[list[Verdict | JudgeFailure]]:
        """Verdicts for many (claim, passages, question) at once: their calls share the thread pool."""
        items = judge_items(items)
        n = max(1, self.options.max_passages_per_call)
        jobs = [(i, lo) for i, item in enumerate(items) for lo in range(0, len(item.passages), n)]
        results = self._map(lambda job: self._extract_call(
            items[job[0]].claim, list(items[job[0]].passages[job[1]:job[1] + n]), items[job[0]].question), jobs)
        out: list[list[Verdict | JudgeFailure]] = [[] for _ in items]
        for (i, _), verdicts in zip(jobs, results, strict=True):
            out[i].extend(verdicts)
        return out

    def close(self) -> None:
        self._client.close()

    # -- steps ---------------------------------------------------------------------------

    def _decompose_one(self, answer: str, question: str) -> list[ClaimText] | JudgeFailure:
        if not answer.strip():
            return []
        prompt = self._prompts["decompose"]
        result = self._call(prompt, decompose_messages(prompt, answer, question), Decomposition,
                            decompose_choices(answer))
        if isinstance(result, JudgeFailure):
            return result
        return claims_of(result.value, answer)

    def _extract_call(self, claim: str, passages: list[str], question: str) -> list[Verdict | JudgeFailure]:
        if not claim.strip():
            return [JudgeFailure(kind="no_content", detail="the claim is empty") for _ in passages]
        prompt = self._prompts["extract"]
        messages = extract_messages(prompt, claim, passages, question)
        choices = extract_choices(passages, claim)
        first = self._call(prompt, messages, Extraction, choices)
        if isinstance(first, JudgeFailure):
            return [first for _ in passages]
        verdicts, problems, dropped = checked_verdicts(first.value, passages, range(1, len(passages) + 1), claim)
        if problems:
            reask = reask_messages(prompt, messages, first.value, [msg for _, msg in sorted(problems.items())])
            second = self._call(prompt, reask, Extraction, choices)
            # A verdict whose only fault was a marked word not in the claim stands (without
            # that word) unless the re-ask gives a better one.
            if isinstance(second, JudgeFailure):
                verdicts.update(reask_outcome({n: m for n, m in problems.items() if n not in verdicts}, second))
            else:
                again, still, dropped_again = checked_verdicts(second.value, passages, problems, claim)
                for n in problems:
                    if n in again:
                        verdicts[n], dropped[n] = again[n], dropped_again.get(n, 0)
                verdicts.update(still_wrong({n: m for n, m in still.items() if n not in verdicts}))
        if sum(dropped.values()):
            with self._lock:
                self.stats.invalid_marks += sum(dropped.values())
        out = [verdicts[n] for n in range(1, len(passages) + 1)]
        bad = sum(isinstance(v, JudgeFailure) and v.kind == "invalid_quote" for v in out)
        if bad:
            with self._lock:
                self.stats.invalid_quotes += bad
                self.failures["invalid_quote"] += bad
        return out

    # -- one model call: cache, budget, retries, typed outcomes --------------------------

    def _call(self, prompt: Prompt, messages: list[dict], schema: type[T],
              choices: dict | None = None) -> Reply | JudgeFailure:
        """One logical call in the current output mode; a rejection of the mode itself
        moves every later call to the next mode (auto) and this one is asked again.
        `choices` tighten the schema a grammar-constrained server gets (grammar_schema)."""
        while True:
            mode = self._modes.current
            result = self._call_in_mode(prompt, messages, schema, mode, choices or {})
            if not isinstance(result, _FormatRejected):
                return result
            if self._modes.after_rejection(mode, result.detail) is None:
                return self._rejected(result.status, result.detail, mode)

    def _call_in_mode(self, prompt: Prompt, messages: list[dict], schema: type[T],
                      mode: str, choices: dict) -> Reply | JudgeFailure | _FormatRejected:
        opts = self.options
        messages = messages_for(mode, messages, schema)
        parts = {"kind": "openai", "model": self.spec.model, "endpoint": self._endpoint, "prompt_id": prompt.id,
                 "prompt_version": prompt.version, "schema_version": self._schema, "response_format": mode,
                 "output": schema.__name__, **opts.answer_parts(), "messages": messages}
        key = cache_key(parts)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                value = cached_value(hit[0], schema)  # None: no longer validates, ask again
                if value is not None:
                    with self._lock:
                        self.stats.cache_hits += 1
                    return Reply(value)
        for attempt in range(opts.max_retries + 1):
            blocked = self._streak.blocked()
            if blocked is not None:
                return self._failure("rejected", f"not sent: the last {opts.max_rejections} calls were rejected "
                                                 f"the same way — {blocked}", sent=False)
            spent = self._budget.reserve()
            if spent is not None:
                return self._failure("budget_exhausted", spent, sent=False)
            with self._lock:
                self.stats.calls += 1
            report_calls(1)
            try:
                parsed = self._request(key, parts, messages, schema, mode, choices)
                self._streak.succeeded()
                self._modes.worked(mode, f"{self.spec.model} at {self._endpoint}")
                return parsed
            except Retry as r:
                if attempt >= opts.max_retries:
                    return self._failure("http_error", f"{r.detail} (gave up after {attempt + 1} attempts)")
                wait = backoff(opts, attempt, r.wait)
                if wait is None:
                    return self._failure(
                        "http_error", f"{r.detail}; the server asked to wait {r.wait:.0f}s (> retry_after_max_s)")
                with self._lock:
                    self.retries += 1
                log.warning("judge call failed (%s); retry %d/%d in %.2fs", self._redact(r.detail), attempt + 1,
                            opts.max_retries, wait)
                time.sleep(wait)
            except Rejection as r:
                if mode != "prompt" and is_about_output_format(r.message):
                    return _FormatRejected(r.status, f"HTTP {r.status}: {r.message}")
                return self._rejected(r.status, f"HTTP {r.status}: {r.message}", mode)
            except ReplyFailed as f:
                self._add_usage(f.usage)
                self._streak.succeeded()  # the server answered: not a rejection streak
                return self._failure(f.kind, f.detail)
        raise AssertionError("unreachable")

    def _rejected(self, status: int, detail: str, mode: str) -> JudgeFailure:
        """A rejection as a typed failure with its hint; counted towards the early stop."""
        hint = hint_for(status, detail, mode, self._modes.forced,
                        self.options.api_key_env or " or ".join(KEY_ENV_FALLBACKS))
        full = f"{detail} — {hint}"
        self._streak.rejected(self._redact(detail)[:300])
        return self._failure("rejected", full)

    def _request(self, key: str, parts: dict, messages: list[dict], schema: type[T], mode: str,
                 choices: dict) -> Reply:
        """One HTTP request and its reply, stored in the cache when valid. Raises Retry,
        Rejection or ReplyFailed."""
        opts = self.options
        raw = send(self._client, self._openai, opts, self.spec.model, messages, schema, mode, choices)
        if mode == "json_schema":
            reply = structured_reply(raw, self._openai, schema, opts.max_completion_tokens)
        else:
            reply = json_object_reply(raw, schema, opts.max_completion_tokens)
        self._add_usage(reply.usage)
        return self._stored(key, parts, reply.value, reply.usage)

    # -- helpers -----------------------------------------------------------------------------

    def _stored(self, key: str, parts: dict, value: dict, usage: Any) -> Reply:
        """A validated reply, cached (successes only) with its token usage."""
        if self.cache is not None:
            self.cache.put(key, parts, value, {"prompt_tokens": getattr(usage, "prompt_tokens", 0) or 0,
                                               "completion_tokens": getattr(usage, "completion_tokens", 0) or 0})
        return Reply(value, usage)

    def _add_usage(self, usage: Any) -> None:
        if usage is None:
            return
        p, c = tokens(usage)
        with self._lock:
            self.stats.prompt_tokens += p
            self.stats.completion_tokens += c
        self._budget.spend_tokens(p + c)

    def _failure(self, kind: str, detail: str, sent: bool = True) -> JudgeFailure:
        """A typed call outcome, counted per kind (and as a failed call when a request was
        sent), its detail redacted."""
        with self._lock:
            self.failures[kind] += 1
            self.stats.failed_calls += int(sent)
        return JudgeFailure(kind=kind, detail=self._redact(detail)[:500])  # type: ignore[arg-type]

    def _redact(self, text: str) -> str:
        for s in self._secrets:
            text = text.replace(s, "***")
        return text

    def _map(self, fn: Callable[[Any], Any], jobs: list) -> list:
        if len(jobs) <= 1 or self.options.max_concurrency <= 1:
            return [fn(j) for j in jobs]
        with ThreadPoolExecutor(max_workers=min(self.options.max_concurrency, len(jobs)),
                                thread_name_prefix="ragspan-judge") as pool:
            return list(pool.map(fn, jobs))
