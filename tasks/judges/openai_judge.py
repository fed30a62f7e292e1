"""The OpenAI-compatible judge: any Chat Completions endpoint with `json_schema` output
(OpenAI, Azure OpenAI v1, vLLM, llama.cpp `llama-server`, Ollama), behind the Judge
Protocol, with the judge cache in front of every model call.

One model call is one chat completion asking for the output schema of one of the
pydantic models below, in the best structured-output mode the server takes
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
"""

from __future__ import annotations

import email.utils
import hashlib
import ipaddress
import json
import logging
import os
import random
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field
from ragspan.tasks.core.locate import locate_quote
from ragspan.tasks.core.text import sentence_spans
from ragspan.tasks.errors import ConfigError
from ragspan.tasks.judges.base import (
    AnswerItem,
    ClaimText,
    JudgeFailure,
    JudgeItem,
    JudgeSpec,
    JudgeStats,
    Verdict,
    answer_items,
    judge_items,
    report_calls,
)
from ragspan.tasks.judges.cache import JudgeCache, cache_key, endpoint_label
from ragspan.tasks.judges.output_modes import (
    AUTO,
    DEFAULT_MAX_REJECTIONS,
    MODES,
    RejectionStreak,
    grammar_schema,
    hint_for,
    is_about_output_format,
    is_rejection,
    json_text_of,
    mode_state,
    schema_instruction,
)
from ragspan.tasks.judges.prompts import Prompt, load_prompt, prompt_version

log = logging.getLogger("ragspan.judge")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
KEY_ENV_FALLBACKS = ("RAGSPAN_JUDGE_API_KEY", "OPENAI_API_KEY")
# Loopback servers (llama-server, vLLM, Ollama on this machine) usually take no key; the
# client still wants a non-empty one.
_NO_KEY = "no-key-required"
# Bump when the output models below change in a way their JSON schema does not show.
SCHEMA_VERSION = "1"

T = TypeVar("T", bound=BaseModel)


# -- output schemas: the field descriptions are part of the instructions ---------------------


class _Out(BaseModel):
    model_config = ConfigDict(extra="ignore")


class DecomposedClaim(_Out):
    claim: str = Field(description=(
        "One atomic, independently verifiable statement of fact made by the answer, "
        "self-contained (pronouns replaced by what they refer to), adding nothing the answer "
        "does not say and keeping every number, date, name, condition and negation."))
    answer_text: str = Field(description=(
        "The exact stretch of the answer this claim comes from, copied verbatim character for "
        "character (same spelling, punctuation, capitalisation, whitespace): a substring of "
        "the answer. Never paraphrased, never shortened with '...'."))


class Decomposition(_Out):
    claims: list[DecomposedClaim] = Field(description=(
        "Every checkable claim of the answer, in the order they appear; empty if the answer "
        "states nothing checkable."))


class PassageVerdict(_Out):
    passage: int = Field(description='The number N of the passage this verdict is about (<passage id="N">).')
    verdict: Literal["supported", "partial", "unsupported"] = Field(description=(
        "supported: the passage states or entails the whole claim. partial: the passage is "
        "about the claim but supports only part of it or contradicts it. unsupported: the "
        "passage is not about the claim."))
    quote: str = Field(description=(
        "For supported or partial: the shortest stretch of THIS passage that shows it, copied "
        "verbatim, an exact substring of the passage (no paraphrase, no '...', no joining of "
        "pieces). For unsupported: an empty string."))
    confidence: float = Field(ge=0, le=1, description="Probability between 0 and 1 that the verdict is right.")
    reason: str = Field(description="One short sentence explaining the verdict.")


class Extraction(_Out):
    verdicts: list[PassageVerdict] = Field(description="Exactly one verdict for every passage, by number.")


def schema_fingerprint() -> str:
    """SCHEMA_VERSION + a hash of the JSON schemas sent (descriptions included)."""
    blob = json.dumps([Decomposition.model_json_schema(), Extraction.model_json_schema()], sort_keys=True)
    return f"{SCHEMA_VERSION}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


# -- options: params.yaml judge.* → JudgeSpec.options → typed -----------------------------------


@dataclass(frozen=True)
class OpenAIOptions:
    """Knobs of the openai judge (params.yaml `judge:`). The first group changes answers and
    is part of every judge-cache key; the rest is transport and budget."""

    temperature: float = 0.0
    seed: int = 0  # < 0: not sent (for servers that reject it)
    max_completion_tokens: int = 2048  # per call (sent as `max_tokens`; a cut reply is `truncated`)
    max_passages_per_call: int = 8
    response_format: str = AUTO  # auto (negotiated, remembered) or one of output_modes.MODES
    # transport / budget (not in judge-cache keys)
    api_key_env: str = ""  # "" → RAGSPAN_JUDGE_API_KEY, then OPENAI_API_KEY
    max_concurrency: int = 4
    max_retries: int = 4
    timeout_s: float = 60.0
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    retry_after_max_s: float = 120.0  # a longer Retry-After ends the retries (http_error)
    max_calls: int = 0  # budget: HTTP requests per run, 0 = no limit
    max_tokens: int = 0  # budget: prompt + completion tokens per run, 0 = no limit
    max_rejections: int = DEFAULT_MAX_REJECTIONS  # identical rejections in a row before calls stop; 0 = never
    cache: bool = True

    # max_passages_per_call changes the messages themselves, which the key already hashes;
    # the output mode actually used is a key part of its own (`_call`).
    ANSWER_KEYS = ("temperature", "seed", "max_completion_tokens")

    @classmethod
    def from_spec(cls, spec: JudgeSpec) -> OpenAIOptions:
        given = dict(spec.options)
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name in given:
                default = getattr(cls, f.name)
                raw = given[f.name]
                if isinstance(default, bool):
                    values[f.name] = raw.strip().lower() in ("1", "true", "yes", "on")
                elif isinstance(default, int):
                    values[f.name] = int(float(raw))
                else:
                    values[f.name] = type(default)(raw)
        return cls(**values)

    def answer_parts(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.ANSWER_KEYS}


def openai_spec(params: Any) -> JudgeSpec:
    """The JudgeSpec of params.yaml's `judge:` section for kind=openai. Raises ConfigError
    (before any work) when the model is missing, the URL carries credentials, or no key
    is set for a non-loopback endpoint."""

    model = (getattr(params, "model", "") or "").strip()
    if not model:
        raise ConfigError(f"judge.kind is {getattr(params, 'kind', 'openai')} but judge.model is empty: the LLM "
                          "judge needs a model — set judge.model in params.yaml or pass --model")
    base_url = (getattr(params, "base_url", "") or "").strip() or DEFAULT_BASE_URL
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"judge.base_url must be an http(s) URL, got {endpoint_label(base_url) or 'nothing'!r}")
    if parts.username or parts.password or parts.query:
        raise ConfigError("judge.base_url must not carry credentials or a query string: the key comes from "
                          "the environment only")
    key_env = (getattr(params, "api_key_env", "") or "").strip()
    if key_env and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key_env):
        # Never echo the value: it is most likely the key itself, pasted in the wrong place.
        raise ConfigError("judge.api_key_env must name an environment variable, not hold the key")
    defaults = OpenAIOptions()
    options = []
    for f in fields(OpenAIOptions):
        value = getattr(params, f.name, getattr(defaults, f.name))
        options.append((f.name, str(value)))
    spec = JudgeSpec(kind="openai", model=model, base_url=base_url.rstrip("/"),
                     prompt_version=prompt_version("decompose", "extract"),
                     options=tuple(options))
    opts = OpenAIOptions.from_spec(spec)
    if api_key_for(opts, spec.base_url) is None:
        raise ConfigError("the openai judge needs an API key in the environment: set "
                          + (opts.api_key_env or " or ".join(KEY_ENV_FALLBACKS))
                          + (" (or judge.api_key_env names another variable)" if not opts.api_key_env else ""))
    return spec


def estimated_cost(stats: JudgeStats, params: Any) -> float | None:
    """Estimated spend from the params price table (per 1k tokens); None without prices."""
    p_in = float(getattr(params, "price_per_1k_prompt", 0.0) or 0.0)
    p_out = float(getattr(params, "price_per_1k_completion", 0.0) or 0.0)
    if not (p_in or p_out):
        return None
    return round(stats.prompt_tokens / 1000 * p_in + stats.completion_tokens / 1000 * p_out, 6)


def _is_loopback(base_url: str) -> bool:
    host = urlsplit(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def api_key_for(opts: OpenAIOptions, base_url: str) -> str | None:
    for name in (opts.api_key_env,) if opts.api_key_env else KEY_ENV_FALLBACKS:
        if os.environ.get(name):
            return os.environ[name]
    return _NO_KEY if _is_loopback(base_url) else None


# -- budget: per flow run (shared by the judges of one spec in this process) ----------------


class _Budget:
    def __init__(self, max_calls: int, max_tokens: int) -> None:
        self.max_calls, self.max_tokens = max_calls, max_tokens
        self.calls = self.tokens = 0
        self._lock = threading.Lock()

    def reserve(self) -> str | None:
        """Take one call from the budget; the reason it is spent, or None."""
        with self._lock:
            if self.max_calls and self.calls >= self.max_calls:
                return f"call budget of {self.max_calls} spent"
            if self.max_tokens and self.tokens >= self.max_tokens:
                return f"token budget of {self.max_tokens} spent ({self.tokens} used)"
            self.calls += 1
            return None

    def spend_tokens(self, n: int) -> None:
        with self._lock:
            self.tokens += n


_BUDGETS: dict[tuple[str, JudgeSpec], _Budget] = {}
_BUDGETS_LOCK = threading.Lock()


def _flow_run_id() -> str | None:
    if "prefect" not in sys.modules:
        return None
    try:
        from prefect.context import FlowRunContext, TaskRunContext

        task_ctx = TaskRunContext.get()
        if task_ctx is not None and task_ctx.task_run.flow_run_id is not None:
            return str(task_ctx.task_run.flow_run_id)
        flow_ctx = FlowRunContext.get()
        if flow_ctx is not None and flow_ctx.flow_run is not None:
            return str(flow_ctx.flow_run.id)
    except Exception:  # noqa: BLE001 — no context is not an error
        return None
    return None


def _budget_for(spec: JudgeSpec, opts: OpenAIOptions) -> _Budget:
    """One budget per flow run and spec (decompose and every extract shard share it);
    outside a flow run, one per judge object."""
    run_id = _flow_run_id() if (opts.max_calls or opts.max_tokens) else None
    if run_id is None:
        return _Budget(opts.max_calls, opts.max_tokens)
    with _BUDGETS_LOCK:
        return _BUDGETS.setdefault((run_id, spec), _Budget(opts.max_calls, opts.max_tokens))


# -- the judge ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Parsed:
    value: dict[str, Any]  # the schema-valid output, as JSON


def _numbered(passages: Sequence[str]) -> str:
    return "\n\n".join(f'<passage id="{i}">\n{p}\n</passage>' for i, p in enumerate(passages, 1))


class _Retry(Exception):
    def __init__(self, detail: str, wait: float | None = None) -> None:
        super().__init__(detail)
        self.detail, self.wait = detail, wait


class OpenAIJudge:
    """The Judge Protocol over an OpenAI-compatible endpoint (see the module docstring)."""

    def __init__(self, spec: JudgeSpec, *, cache: JudgeCache | bool | None = True) -> None:
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
            cache = JudgeCache() if self.options.cache else None
        self.cache: JudgeCache | None = cache if isinstance(cache, JudgeCache) else None
        self._budget = _budget_for(spec, self.options)
        key = api_key_for(self.options, spec.base_url or DEFAULT_BASE_URL)
        if key is None:
            raise RuntimeError("the openai judge needs an API key in the environment: set "
                               + (self.options.api_key_env or " or ".join(KEY_ENV_FALLBACKS)))
        self._secrets = tuple(s for s in (key,) if s and s != _NO_KEY)
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
        messages = [{"role": "system", "content": prompt.system},
                    {"role": "user", "content": prompt.render("user", answer=answer, question=question)}]
        result = self._call(prompt, messages, Decomposition,
                            {"answer_texts": [answer[a:b] for a, b in sentence_spans(answer)]})
        if isinstance(result, JudgeFailure):
            return result
        claims, cursor = [], 0
        for c in Decomposition.model_validate(result.value).claims:
            text = c.claim.strip()
            if not text:
                continue
            hit = locate_quote(answer, c.answer_text, cursor) or locate_quote(answer, text, cursor)
            if hit is None:
                claims.append(ClaimText(text=text))
            else:
                claims.append(ClaimText(text=text, start=hit[0], end=hit[1]))
                cursor = hit[1]
        return claims

    def _extract_call(self, claim: str, passages: list[str], question: str) -> list[Verdict | JudgeFailure]:
        if not claim.strip():
            return [JudgeFailure(kind="no_content", detail="the claim is empty") for _ in passages]
        prompt = self._prompts["extract"]
        messages = [{"role": "system", "content": prompt.system},
                    {"role": "user", "content": prompt.render("user", claim=claim, question=question,
                                                                passages=_numbered(passages))}]
        choices = {"passage_quotes": [[p[a:b] for a, b in sentence_spans(p)] for p in passages]}
        first = self._call(prompt, messages, Extraction, choices)
        if isinstance(first, JudgeFailure):
            return [first for _ in passages]
        verdicts, problems = self._checked(first.value, passages, range(1, len(passages) + 1))
        if problems:
            reask = messages + [
                {"role": "assistant", "content": json.dumps(first.value, ensure_ascii=False, sort_keys=True)},
                {"role": "user", "content": prompt.render("reask", problems="\n".join(
                    f"- {msg}" for _, msg in sorted(problems.items())))},
            ]
            second = self._call(prompt, reask, Extraction, choices)
            if isinstance(second, JudgeFailure):
                for n, msg in problems.items():
                    verdicts[n] = JudgeFailure(kind=second.kind if "no verdict" in msg else "invalid_quote",
                                               detail=f"{msg} Re-ask failed: {second.kind} {second.detail}"[:500])
            else:
                again, still = self._checked(second.value, passages, problems)
                verdicts.update(again)
                for n, msg in still.items():
                    verdicts[n] = JudgeFailure(kind="unparseable" if "no verdict" in msg else "invalid_quote",
                                               detail=f"after one re-ask: {msg}"[:500])
        out = [verdicts[n] for n in range(1, len(passages) + 1)]
        bad = sum(isinstance(v, JudgeFailure) and v.kind == "invalid_quote" for v in out)
        if bad:
            with self._lock:
                self.stats.invalid_quotes += bad
                self.failures["invalid_quote"] += bad
        return out

    @staticmethod
    def _checked(value: dict, passages: list[str], wanted) -> tuple[dict[int, Verdict | JudgeFailure], dict[int, str]]:
        """Accepted verdicts and, per passage number, what was wrong (for the re-ask)."""
        by_number: dict[int, PassageVerdict] = {}
        for v in Extraction.model_validate(value).verdicts:
            by_number.setdefault(v.passage, v)
        ok: dict[int, Verdict | JudgeFailure] = {}
        problems: dict[int, str] = {}
        for n in wanted:
            v = by_number.get(n)
            if v is None:
                problems[n] = f"Passage {n}: no verdict was given for this passage."
                continue
            if v.verdict == "unsupported":
                ok[n] = Verdict(verdict="unsupported", confidence=v.confidence, reason=v.reason,
                                support=1 - v.confidence)
                continue
            hit = locate_quote(passages[n - 1], v.quote, None)
            if hit is None:
                shown = v.quote if len(v.quote) <= 300 else v.quote[:300] + "…"
                problems[n] = (f"Passage {n}: verdict `{v.verdict}` needs a quote, but the quote was empty."
                               if not v.quote.strip() else
                               f"Passage {n}: the quote {shown!r} is not an exact substring of passage {n}.")
                continue
            # The model states how sure it is of its verdict; as a probability of support
            # that is its confidence for `supported` and the rest for anything else.
            ok[n] = Verdict(verdict=v.verdict, confidence=v.confidence, quote=v.quote, quote_start=hit[0],
                            reason=v.reason, support=v.confidence if v.verdict == "supported" else 1 - v.confidence)
        return ok, problems

    # -- one model call: cache, budget, retries, typed outcomes --------------------------

    def _call(self, prompt: Prompt, messages: list[dict], schema: type[T],
              choices: dict | None = None) -> _Parsed | JudgeFailure:
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
                      mode: str, choices: dict) -> _Parsed | JudgeFailure | _FormatRejected:
        opts = self.options
        messages = _messages_for(mode, messages, schema)
        parts = {"kind": "openai", "model": self.spec.model, "endpoint": self._endpoint, "prompt_id": prompt.id,
                 "prompt_version": prompt.version, "schema_version": self._schema, "response_format": mode,
                 "output": schema.__name__, **opts.answer_parts(), "messages": messages}
        key = cache_key(parts)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                try:
                    value = schema.model_validate(hit[0]).model_dump(mode="json")
                except ValueError:
                    value = None  # an entry that no longer validates: ask again
                if value is not None:
                    with self._lock:
                        self.stats.cache_hits += 1
                    return _Parsed(value)
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
            except _Retry as r:
                if attempt >= opts.max_retries:
                    return self._failure("http_error", f"{r.detail} (gave up after {attempt + 1} attempts)")
                wait = min(opts.backoff_max_s, opts.backoff_base_s * 2 ** attempt) * random.uniform(0.5, 1.0)
                if r.wait is not None:
                    if r.wait > opts.retry_after_max_s:
                        return self._failure(
                            "http_error", f"{r.detail}; the server asked to wait {r.wait:.0f}s (> retry_after_max_s)")
                    wait = max(wait, r.wait)
                with self._lock:
                    self.retries += 1
                log.warning("judge call failed (%s); retry %d/%d in %.2fs", self._redact(r.detail), attempt + 1,
                            opts.max_retries, wait)
                time.sleep(wait)
            except _Rejection as r:
                if mode != "prompt" and is_about_output_format(r.message):
                    return _FormatRejected(r.status, f"HTTP {r.status}: {r.message}")
                return self._rejected(r.status, f"HTTP {r.status}: {r.message}", mode)
            except _Failed as f:
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
                 choices: dict) -> _Parsed:
        oa, opts = self._openai, self.options
        common = dict(model=self.spec.model, messages=messages, temperature=opts.temperature,
                      max_tokens=opts.max_completion_tokens, **({"seed": opts.seed} if opts.seed >= 0 else {}))
        formats = {"json_object_schema": {"type": "json_object",
                                          "schema": grammar_schema(schema.model_json_schema(), **choices)},
                   "json_object": {"type": "json_object"}}
        try:
            if mode == "json_schema":
                raw = self._client.chat.completions.with_raw_response.parse(response_format=schema, **common)
            else:
                # JSON mode (with the schema attached for grammar-constrained servers such as
                # llama-cpp-python's), or a plain prompt; validated with pydantic below all the same.
                extra = {"response_format": formats[mode]} if mode in formats else {}
                raw = self._client.chat.completions.with_raw_response.create(**extra, **common)
        except oa.RateLimitError as e:
            raise _Retry("HTTP 429 rate limited", _retry_after(e.response.headers)) from None
        except oa.APITimeoutError:
            raise _Retry(f"timed out after {opts.timeout_s}s") from None
        except oa.APIConnectionError as e:
            raise _Retry(f"connection error: {type(e.__cause__ or e).__name__}") from None
        except oa.APIStatusError as e:
            body = _body_text(e)
            if is_rejection(e.status_code, body):
                raise _Rejection(e.status_code, _message_of(e)) from None
            raise _Retry(f"HTTP {e.status_code}", _retry_after(e.response.headers)) from None
        if mode != "json_schema":
            return self._json_object_reply(raw, key, parts, schema)
        try:
            completion = raw.parse()
        except oa.LengthFinishReasonError as e:
            self._add_usage(e.completion.usage)
            raise _Failed("truncated", f"finish_reason=length at max_completion_tokens={opts.max_completion_tokens}") from None
        except oa.ContentFilterFinishReasonError:
            raise _Failed("refusal", "finish_reason=content_filter") from None
        except Exception as e:  # noqa: BLE001 — not JSON, fails the schema, malformed body
            self._add_usage(_usage_of_raw(raw))
            raise _Failed("unparseable", f"{type(e).__name__}: {str(e)[:300]}") from None
        self._add_usage(completion.usage)
        if not completion.choices:
            raise _Failed("unparseable", "the response has no choices")
        message = completion.choices[0].message
        if message.refusal:
            raise _Failed("refusal", str(message.refusal)[:300])
        if message.parsed is None:
            raise _Failed("unparseable", "the response has no content")
        try:  # validate again: a server may claim `strict` and not honour it
            value = schema.model_validate(message.parsed.model_dump(mode="json")).model_dump(mode="json")
        except ValueError as e:
            raise _Failed("unparseable", str(e)[:300]) from None
        return self._stored(key, parts, value, completion.usage)

    def _json_object_reply(self, raw: Any, key: str, parts: dict, schema: type[T]) -> _Parsed:
        """The JSON-mode twin of the structured-output path: same typed outcomes."""
        try:
            completion = raw.parse()
        except Exception as e:  # noqa: BLE001 — a malformed body
            raise _Failed("unparseable", f"{type(e).__name__}: {str(e)[:300]}") from None
        self._add_usage(completion.usage)
        if not completion.choices:
            raise _Failed("unparseable", "the response has no choices")
        choice = completion.choices[0]
        if choice.finish_reason == "length":
            raise _Failed("truncated", f"finish_reason=length at max_completion_tokens={self.options.max_completion_tokens}")
        if choice.finish_reason == "content_filter" or getattr(choice.message, "refusal", None):
            raise _Failed("refusal", str(getattr(choice.message, "refusal", None) or "finish_reason=content_filter")[:300])
        if not choice.message.content:
            raise _Failed("unparseable", "the response has no content")
        try:
            # strict=False: grammar-constrained servers let raw newlines into strings
            # (measured: llama-cpp-python); that is still the JSON the model meant.
            value = schema.model_validate(json.loads(json_text_of(choice.message.content), strict=False)
                                          ).model_dump(mode="json")
        except ValueError as e:
            raise _Failed("unparseable", str(e)[:300]) from None
        return self._stored(key, parts, value, completion.usage)

    # -- helpers -----------------------------------------------------------------------------

    def _stored(self, key: str, parts: dict, value: dict, usage: Any) -> _Parsed:
        """A validated reply, cached (successes only) with its token usage."""
        if self.cache is not None:
            self.cache.put(key, parts, value, {"prompt_tokens": getattr(usage, "prompt_tokens", 0) or 0,
                                               "completion_tokens": getattr(usage, "completion_tokens", 0) or 0})
        return _Parsed(value)

    def _add_usage(self, usage: Any) -> None:
        if usage is None:
            return
        p, c = _tokens(usage)
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


class _Rejection(Exception):
    """The server refused the request as invalid (output_modes.is_rejection)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass(frozen=True)
class _FormatRejected:
    """A call whose output mode the server rejected: try the next mode."""

    status: int
    detail: str


def _messages_for(mode: str, messages: list[dict], schema: type[BaseModel]) -> list[dict]:
    """The messages as sent in `mode`. Servers without structured outputs are mostly local
    ones whose chat templates may drop the system role (Gemma's does: measured, the prompt
    tokens counted only the user turn), so there the instructions open the first user
    message; a server not told the schema also reads it there."""
    if mode == "json_schema":
        return messages
    system, user, *rest = messages
    text = system["content"]
    if mode != "json_object_schema":
        text += "\n\n" + schema_instruction(schema.model_json_schema())
    return [{"role": "user", "content": text + "\n\n" + user["content"]}, *rest]


def _body_text(e: Any) -> str:
    """The error body as text (for telling a validation error from a server fault)."""
    body = getattr(e, "body", None)
    if body is not None:
        try:
            return json.dumps(body) if not isinstance(body, str) else body
        except (TypeError, ValueError):
            return str(body)
    try:
        return e.response.text
    except Exception:  # noqa: BLE001 — best effort
        return ""


class _Failed(Exception):
    """A call that ended without a usable answer and must not be retried."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(kind)
        self.kind, self.detail = kind, detail


def _tokens(usage: Any) -> tuple[int, int]:
    get = usage.get if isinstance(usage, dict) else (lambda k: getattr(usage, k, None))
    return int(get("prompt_tokens") or 0), int(get("completion_tokens") or 0)


def _retry_after(headers: Any) -> float | None:
    """Seconds a 429/503 asks to wait: `retry-after-ms`, `retry-after` (seconds or HTTP date)."""
    try:
        if ms := headers.get("retry-after-ms"):
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _message_of(e: Any) -> str:
    """The server's error message (redacted by the caller): OpenAI's `error.message`, a
    plain `message`, FastAPI's validation `detail` list, else the body's text."""
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        inner = body.get("error")
        msg = inner.get("message") if isinstance(inner, dict) else body.get("message") or inner
        if msg:
            return str(msg)[:300]
        detail = body.get("detail")
        if isinstance(detail, list):
            return "; ".join(f"{'.'.join(str(x) for x in d.get('loc', ()) if x != 'body')}: {d.get('msg', '')}"
                             if isinstance(d, dict) else str(d) for d in detail)[:300]
        if detail:
            return str(detail)[:300]
    text = _body_text(e).strip()
    return text[:300] if text else type(e).__name__


def _usage_of_raw(raw: Any) -> dict | None:
    try:
        return raw.http_response.json().get("usage")
    except Exception:  # noqa: BLE001 — best effort: garbage bodies have no usage
        return None
