"""The openai judge's settings: params.yaml `judge:` → a JudgeSpec (checked before any
work) → typed options; where the API key comes from; the estimated spend.

The API key is read from the environment only (`judge.api_key_env`, else
RAGSPAN_JUDGE_API_KEY, else OPENAI_API_KEY); loopback endpoints need none.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import urlsplit

from ragspan.tasks.errors import ConfigError
from ragspan.tasks.judges.base import JudgeSpec, JudgeStats
from ragspan.tasks.judges.cache import endpoint_label
from ragspan.tasks.judges.output_modes import AUTO, DEFAULT_MAX_REJECTIONS
from ragspan.tasks.judges.prompts import prompt_version

DEFAULT_BASE_URL = "https://api.openai.com/v1"
KEY_ENV_FALLBACKS = ("RAGSPAN_JUDGE_API_KEY", "OPENAI_API_KEY")
# Loopback servers (llama-server, vLLM, Ollama on this machine) usually take no key; the
# client still wants a non-empty one.
NO_KEY = "no-key-required"


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


def is_loopback(base_url: str) -> bool:
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
    return NO_KEY if is_loopback(base_url) else None
