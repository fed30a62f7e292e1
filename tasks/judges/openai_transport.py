"""How the openai judge's requests travel: one chat completion per request through the
`openai` client (its own retries off), the errors sorted into retry / rejection, the
backoff between retries (exponential with jitter, Retry-After honoured), and the per
flow-run budget of calls and tokens.

    429 / 5xx / 408 / timeout / connection ...... Retry (the judge backs off and retries)
    other 4xx, or a 5xx whose body is a
    request-validation error .................... Rejection (never retried)
"""

from __future__ import annotations

import email.utils
import json
import random
import sys
import threading
import time
from typing import Any

from pydantic import BaseModel
from ragspan.tasks.judges.base import JudgeSpec
from ragspan.tasks.judges.openai_options import OpenAIOptions
from ragspan.tasks.judges.output_modes import grammar_schema, is_rejection


class Retry(Exception):
    """A failure another attempt may not meet (rate limit, server fault, timeout)."""

    def __init__(self, detail: str, wait: float | None = None) -> None:
        super().__init__(detail)
        self.detail, self.wait = detail, wait


class Rejection(Exception):
    """The server refused the request as invalid (output_modes.is_rejection)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def send(client: Any, oa: Any, opts: OpenAIOptions, model: str, messages: list[dict],
         schema: type[BaseModel], mode: str, choices: dict) -> Any:
    """One HTTP request in output mode `mode`; the raw response (parsed by openai_replies).
    Raises Retry or Rejection."""
    common = dict(model=model, messages=messages, temperature=opts.temperature,
                  max_tokens=opts.max_completion_tokens, **({"seed": opts.seed} if opts.seed >= 0 else {}))
    formats = {"json_object_schema": {"type": "json_object",
                                      "schema": grammar_schema(schema.model_json_schema(), **choices)},
               "json_object": {"type": "json_object"}}
    try:
        if mode == "json_schema":
            return client.chat.completions.with_raw_response.parse(response_format=schema, **common)
        # JSON mode (with the schema attached for grammar-constrained servers such as
        # llama-cpp-python's), or a plain prompt; validated with pydantic all the same.
        extra = {"response_format": formats[mode]} if mode in formats else {}
        return client.chat.completions.with_raw_response.create(**extra, **common)
    except oa.RateLimitError as e:
        raise Retry("HTTP 429 rate limited", retry_after(e.response.headers)) from None
    except oa.APITimeoutError:
        raise Retry(f"timed out after {opts.timeout_s}s") from None
    except oa.APIConnectionError as e:
        raise Retry(f"connection error: {type(e.__cause__ or e).__name__}") from None
    except oa.APIStatusError as e:
        body = body_text(e)
        if is_rejection(e.status_code, body):
            raise Rejection(e.status_code, message_of(e)) from None
        raise Retry(f"HTTP {e.status_code}", retry_after(e.response.headers)) from None


def backoff(opts: OpenAIOptions, attempt: int, asked: float | None) -> float | None:
    """Seconds to wait before retry `attempt + 1`: exponential with jitter, at least what the
    server asked for; None when the server asked for more than retry_after_max_s."""
    wait = min(opts.backoff_max_s, opts.backoff_base_s * 2 ** attempt) * random.uniform(0.5, 1.0)
    if asked is None:
        return wait
    if asked > opts.retry_after_max_s:
        return None
    return max(wait, asked)


def body_text(e: Any) -> str:
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


def retry_after(headers: Any) -> float | None:
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


def message_of(e: Any) -> str:
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
    text = body_text(e).strip()
    return text[:300] if text else type(e).__name__


# -- budget: per flow run (shared by the judges of one spec in this process) ----------------


class Budget:
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


_BUDGETS: dict[tuple[str, JudgeSpec], Budget] = {}
_BUDGETS_LOCK = threading.Lock()


def flow_run_id() -> str | None:
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


def budget_for(spec: JudgeSpec, opts: OpenAIOptions) -> Budget:
    """One budget per flow run and spec (decompose and every extract shard share it);
    outside a flow run, one per judge object."""
    run_id = flow_run_id() if (opts.max_calls or opts.max_tokens) else None
    if run_id is None:
        return Budget(opts.max_calls, opts.max_tokens)
    with _BUDGETS_LOCK:
        return _BUDGETS.setdefault((run_id, spec), Budget(opts.max_calls, opts.max_tokens))
