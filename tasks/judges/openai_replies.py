"""What the openai judge makes of a reply: the completion parsed and validated with pydantic
whatever the server claims (typed outcomes, never an exception out of the judge), and
the content checked — claims placed in the answer, each quote found verbatim in the
passage it is about. Pure functions.

    message.refusal / content_filter ............ ReplyFailed(refusal)
    finish_reason == "length" ................... ReplyFailed(truncated)
    not JSON / fails the schema ................. ReplyFailed(unparseable)
    parsed ...................................... Reply(value, usage)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from ragspan.tasks.core.locate import locate_quote
from ragspan.tasks.judges.base import ClaimText, JudgeFailure, Verdict
from ragspan.tasks.judges.openai_messages import Decomposition, Extraction, PassageVerdict
from ragspan.tasks.judges.output_modes import json_text_of


@dataclass(frozen=True)
class Reply:
    value: dict[str, Any]  # the schema-valid output, as JSON
    usage: Any = None  # the completion's token usage (object or dict), if any


class ReplyFailed(Exception):
    """A call that ended without a usable answer and must not be retried; `usage` is the
    tokens it still cost, when the reply says."""

    def __init__(self, kind: str, detail: str, usage: Any = None) -> None:
        super().__init__(kind)
        self.kind, self.detail, self.usage = kind, detail, usage


def structured_reply(raw: Any, oa: Any, schema: type[BaseModel], max_completion_tokens: int) -> Reply:
    """The reply of a `json_schema` (structured outputs) request."""
    try:
        completion = raw.parse()
    except oa.LengthFinishReasonError as e:
        raise ReplyFailed("truncated", f"finish_reason=length at max_completion_tokens={max_completion_tokens}",
                          e.completion.usage) from None
    except oa.ContentFilterFinishReasonError:
        raise ReplyFailed("refusal", "finish_reason=content_filter") from None
    except Exception as e:  # noqa: BLE001 — not JSON, fails the schema, malformed body
        raise ReplyFailed("unparseable", f"{type(e).__name__}: {str(e)[:300]}", usage_of_raw(raw)) from None
    usage = completion.usage
    if not completion.choices:
        raise ReplyFailed("unparseable", "the response has no choices", usage)
    message = completion.choices[0].message
    if message.refusal:
        raise ReplyFailed("refusal", str(message.refusal)[:300], usage)
    if message.parsed is None:
        raise ReplyFailed("unparseable", "the response has no content", usage)
    try:  # validate again: a server may claim `strict` and not honour it
        value = schema.model_validate(message.parsed.model_dump(mode="json")).model_dump(mode="json")
    except ValueError as e:
        raise ReplyFailed("unparseable", str(e)[:300], usage) from None
    return Reply(value, usage)


def json_object_reply(raw: Any, schema: type[BaseModel], max_completion_tokens: int) -> Reply:
    """The JSON-mode twin of the structured-output path: same typed outcomes."""
    try:
        completion = raw.parse()
    except Exception as e:  # noqa: BLE001 — a malformed body
        raise ReplyFailed("unparseable", f"{type(e).__name__}: {str(e)[:300]}") from None
    usage = completion.usage
    if not completion.choices:
        raise ReplyFailed("unparseable", "the response has no choices", usage)
    choice = completion.choices[0]
    if choice.finish_reason == "length":
        raise ReplyFailed("truncated", f"finish_reason=length at max_completion_tokens={max_completion_tokens}",
                          usage)
    if choice.finish_reason == "content_filter" or getattr(choice.message, "refusal", None):
        raise ReplyFailed("refusal", str(getattr(choice.message, "refusal", None)
                                         or "finish_reason=content_filter")[:300], usage)
    if not choice.message.content:
        raise ReplyFailed("unparseable", "the response has no content", usage)
    try:
        # strict=False: grammar-constrained servers let raw newlines into strings
        # (measured: llama-cpp-python); that is still the JSON the model meant.
        value = schema.model_validate(json.loads(json_text_of(choice.message.content), strict=False)
                                      ).model_dump(mode="json")
    except ValueError as e:
        raise ReplyFailed("unparseable", str(e)[:300], usage) from None
    return Reply(value, usage)


def cached_value(hit: Any, schema: type[BaseModel]) -> dict[str, Any] | None:
    """A judge-cache entry's value, or None when it no longer validates (ask again)."""
    try:
        return schema.model_validate(hit).model_dump(mode="json")
    except ValueError:
        return None


def tokens(usage: Any) -> tuple[int, int]:
    """(prompt, completion) tokens of a usage object or dict."""
    get = usage.get if isinstance(usage, dict) else (lambda k: getattr(usage, k, None))
    return int(get("prompt_tokens") or 0), int(get("completion_tokens") or 0)


def usage_of_raw(raw: Any) -> dict | None:
    try:
        return raw.http_response.json().get("usage")
    except Exception:  # noqa: BLE001 — best effort: garbage bodies have no usage
        return None


# -- content checks -----------------------------------------------------------------------


def claims_of(value: dict, answer: str) -> list[ClaimText]:
    """The decomposition's claims, each placed in the answer by its verbatim text (exact,
    then normalised; in order), unplaced (no offsets) when it is not there."""
    claims, cursor = [], 0
    for c in Decomposition.model_validate(value).claims:
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


def checked_verdicts(value: dict, passages: Sequence[str], wanted: Iterable[int]
                     ) -> tuple[dict[int, Verdict | JudgeFailure], dict[int, str]]:
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


def reask_outcome(problems: dict[int, str], second: JudgeFailure) -> dict[int, Verdict | JudgeFailure]:
    """The passages still wrong when the re-ask itself failed."""
    return {n: JudgeFailure(kind=second.kind if "no verdict" in msg else "invalid_quote",
                            detail=f"{msg} Re-ask failed: {second.kind} {second.detail}"[:500])
            for n, msg in problems.items()}


def still_wrong(problems: dict[int, str]) -> dict[int, Verdict | JudgeFailure]:
    """The passages wrong again after one re-ask."""
    return {n: JudgeFailure(kind="unparseable" if "no verdict" in msg else "invalid_quote",
                            detail=f"after one re-ask: {msg}"[:500])
            for n, msg in problems.items()}
