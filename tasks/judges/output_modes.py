"""How an OpenAI-compatible server is asked for JSON, and which requests it rejects.

Servers differ in the structured-output modes they take (measured: llama-cpp-python's
server answers `json_schema` with HTTP 500 and a request-validation body, and constrains
its output to a schema given as `{"type": "json_object", "schema": …}`; OpenAI and vLLM
take `json_schema`; some gateways take only plain JSON mode). The judge tries them in
this order, best first, and moves down only when the server rejects the mode itself:

    json_schema         response_format={"type": "json_schema", …}   (structured outputs)
    json_object_schema  response_format={"type": "json_object", "schema": …}  (grammar)
    json_object         response_format={"type": "json_object"}, the schema in the prompt
    prompt              no response_format, the schema in the prompt

Whatever the mode, every reply is validated with pydantic. The mode that worked is
remembered per endpoint + model (in the judge cache database and in this process), so
the next run starts there; `judge.response_format` forces one mode instead.

A *rejection* is an answer no retry can change: a 4xx other than 408/409/429, or a 5xx
whose body is a request-validation error. It is never retried; it carries a hint naming
the setting or flag that would change it.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger("ragspan.judge")

MODES = ("json_schema", "json_object_schema", "json_object", "prompt")
AUTO = "auto"
# How many identical rejections in a row (no success between) end a run's calls early.
DEFAULT_MAX_REJECTIONS = 3

_RETRYABLE_4XX = frozenset({408, 409, 429})
# Bodies of 5xx answers that are a request-validation error, not a server fault
# (llama-cpp-python: 500 with pydantic's "Input should be …"; FastAPI/vLLM: "validation").
_VALIDATION_BODY = re.compile(r"validation|input should be|unprocessable|extra inputs|field required|"
                              r"invalid request|not supported|unsupported|unknown (?:field|parameter)", re.IGNORECASE)
_ABOUT_FORMAT = re.compile(r"response_format|json_schema|json_object|\bschema\b|structured|grammar|"
                           r"\bformat\b", re.IGNORECASE)


def is_rejection(status: int, body: str) -> bool:
    """A request the server refuses as invalid: retrying the same request cannot help."""
    if 400 <= status < 500:
        return status not in _RETRYABLE_4XX
    return status >= 500 and bool(_VALIDATION_BODY.search(body or ""))


def is_about_output_format(message: str) -> bool:
    """Does a rejection name the output format (so another mode may be accepted)?"""
    return bool(_ABOUT_FORMAT.search(message or ""))


def hint_for(status: int, message: str, mode: str, forced: bool, key_env: str) -> str:
    """The setting or flag that would change a rejection, in one sentence."""
    text = message or ""
    if is_about_output_format(text):
        if forced:
            return (f"the server does not take response_format mode {mode!r}: set judge.response_format: auto "
                    f"(ragspan tries {', '.join(MODES)} and remembers what works)")
        return "the server rejected every structured-output mode; run `ragspan judge check` to see what it takes"
    if status in (401, 403):
        return f"check the API key in ${key_env} (judge.api_key_env names another variable)"
    if status == 404:
        return "check --model / judge.model and --base-url / judge.base_url (`ragspan judge check` lists the models)"
    if re.search(r"\bseed\b", text, re.IGNORECASE):
        return "the server rejects `seed`: set judge.seed: -1 (not sent)"
    if re.search(r"max_tokens|max_completion_tokens|context length|maximum context|too long|n_ctx", text, re.IGNORECASE):
        return ("lower judge.max_completion_tokens or judge.max_passages_per_call, or give the server "
                "a longer context")
    if re.search(r"temperature", text, re.IGNORECASE):
        return "the server rejects judge.temperature: set it within the server's range"
    return "check --model, --base-url and the judge.* settings (`ragspan judge check --base-url URL --model M`)"


# Confidence values a grammar may produce (a grammar does not enforce `maximum`).
_CONFIDENCES = [round(i / 10, 1) for i in range(11)]


# Bounds that keep a small model from looping until max_tokens (measured: Gemma 3 270M
# repeats a claim or a reason until the reply is cut).
_MAX_REASON_CHARS = 120
_MAX_CLAIM_CHARS = 400
_CLAIMS_PER_SENTENCE = 2


_MAX_MARKS = 6  # unsupported stretches per verdict a small model may list
_MAX_SAYS_CHARS = 80


def grammar_schema(schema: dict, *, passage_quotes: list[list[str]] | None = None,
                   answer_texts: list[str] | None = None, claim_words: list[str] | None = None) -> dict:
    """The schema sent to a grammar-constrained server (`json_object_schema`), tightened
    so that even a small model's output is usable: exactly one verdict per passage sent,
    in order, whose quote can only be one of that passage's sentences (or empty) and
    whose confidence is one of 0, 0.1, …, 1; claims bounded in number and length, each
    answer text one of the answer's sentences; reasons bounded. Descriptions are dropped
    (small models copy them into the values); the instructions are in the prompt. Replies
    are still validated, and quotes still located, like any other."""
    out = json.loads(json.dumps(schema))

    def strip(node: object) -> None:
        if isinstance(node, dict):
            node.pop("description", None)
            for v in node.values():
                strip(v)
        elif isinstance(node, list):
            for v in node:
                strip(v)

    strip(out)
    defs = out.get("$defs", {})
    verdict = defs.get("PassageVerdict")
    if verdict is not None and passage_quotes is not None:
        items = []
        for n, quotes in enumerate(passage_quotes, 1):
            # unsupported ⇔ an empty quote; supported/partial ⇔ one of the passage's sentences
            variants = []
            for verdicts, quote in ((["unsupported"], {"type": "string", "enum": [""]}),
                                    (["supported", "partial"],
                                     {"type": "string", "enum": list(dict.fromkeys(q for q in quotes if q))})):
                if not quote["enum"]:
                    continue
                one = json.loads(json.dumps(verdict))
                props = one["properties"]
                props["passage"] = {"type": "integer", "enum": [n]}
                props["verdict"] = {"type": "string", "enum": verdicts}
                props["quote"] = quote
                props["confidence"] = {"type": "number", "enum": _CONFIDENCES}
                props["reason"] = {"type": "string", "maxLength": _MAX_REASON_CHARS}
                if "unsupported_words" in props:
                    # only a partial verdict marks words, each one of the claim's words (stretches
                    # of several are joined again when placed); what the passage says instead is
                    # bounded and still checked against the passage
                    marks = {"type": "object", "properties": {
                        "words": {"type": "string", "enum": claim_words} if claim_words else
                        {"type": "string", "maxLength": _MAX_CLAIM_CHARS},
                        "passage_says": {"type": "string", "maxLength": _MAX_SAYS_CHARS}},
                        "required": ["words", "passage_says"], "additionalProperties": False}
                    props["unsupported_words"] = {"type": "array", "items": marks,
                                                  "maxItems": _MAX_MARKS if "partial" in verdicts else 0}
                variants.append(one)
            items.append({"anyOf": variants} if len(variants) > 1 else variants[0])
        out["properties"]["verdicts"] = {"type": "array", "prefixItems": items, "items": False,
                                         "minItems": len(items), "maxItems": len(items)}
    claim = defs.get("DecomposedClaim", {}).get("properties")
    if claim is not None and answer_texts:
        claim["answer_text"] = {"type": "string", "enum": list(dict.fromkeys(answer_texts))}
        claim["claim"] = {"type": "string", "maxLength": _MAX_CLAIM_CHARS}
        out["properties"]["claims"].update(maxItems=_CLAIMS_PER_SENTENCE * len(answer_texts))
    return out


def schema_instruction(schema: dict) -> str:
    """What the system prompt gains when the server is not told the schema itself."""
    return ("Reply with one JSON object and nothing else (no prose, no code fence). It must validate "
            "against this JSON schema:\n" + json.dumps(schema, ensure_ascii=False, separators=(",", ":")))


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def json_text_of(content: str) -> str:
    """The JSON object in a prompt-mode reply: the reply itself, or inside a code fence,
    or from its first `{` to its last `}` (small models add prose around it)."""
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        return fenced.group(1)
    if text.startswith("{"):
        return text
    start, end = text.find("{"), text.rfind("}")
    return text[start:end + 1] if 0 <= start < end else text


@dataclass
class ModeState:
    """The mode in use for one endpoint + model, shared by every judge of this process."""

    current: str
    forced: bool
    why: str = ""
    announced: bool = False
    moved: bool = False  # negotiated down in this process: remember where it landed
    remember: Callable[[str, str], None] | None = None  # (mode, why) → stored for later runs
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def after_rejection(self, mode: str, detail: str) -> str | None:
        """The next mode to try after `mode` was rejected as a format, or None (forced or
        none left). Concurrent calls that saw the same rejection move down only once."""
        with self._lock:
            if self.forced:
                return None
            if self.current != mode:
                return self.current
            i = MODES.index(mode)
            if i + 1 >= len(MODES):
                return None
            self.current = MODES[i + 1]
            self.why = (self.why + "; " if self.why else "") + f"{mode} rejected ({detail[:160]})"
            self.announced = False
            self.moved = True
            return self.current

    def worked(self, mode: str, label: str) -> None:
        """A reply in `mode` validated: say once which mode is in use and why, and
        remember it when it was negotiated."""
        with self._lock:
            if self.announced or mode != self.current:
                return
            self.announced = True
            why = self.why or ("forced by judge.response_format" if self.forced else "accepted by the server")
            negotiated = self.moved
        log.warning("judge %s: structured output via %s — %s", label, mode, why)
        if negotiated and self.remember is not None:
            self.remember(mode, why)


_STATES: dict[tuple[str, str, str], ModeState] = {}
_STATES_LOCK = threading.Lock()


def mode_state(endpoint: str, model: str, setting: str,
               recall: Callable[[], tuple[str, str] | None],
               remember: Callable[[str, str], None] | None) -> ModeState:
    """The process-wide state for endpoint + model: `setting` (a forced mode or auto);
    with auto, start from the remembered mode (recall → (mode, why)) if any."""
    with _STATES_LOCK:
        key = (endpoint, model, setting)
        state = _STATES.get(key)
        if state is None:
            if setting != AUTO:
                state = ModeState(current=setting, forced=True)
            else:
                known = recall()
                if known is not None and known[0] in MODES:
                    state = ModeState(current=known[0], forced=False, why=f"remembered: {known[1]}",
                                      remember=remember)
                else:
                    state = ModeState(current=MODES[0], forced=False, remember=remember)
            _STATES[key] = state
        return state


def forget_modes() -> None:
    """Drop this process's mode states (tests; after `ragspan cache clear`)."""
    with _STATES_LOCK:
        _STATES.clear()


class RejectionStreak:
    """Identical rejections in a row: after `limit` of them, later calls are not sent."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.signature: str | None = None
        self.count = 0
        self._lock = threading.Lock()

    def blocked(self) -> str | None:
        with self._lock:
            if self.limit and self.signature is not None and self.count >= self.limit:
                return self.signature
            return None

    def rejected(self, signature: str) -> None:
        with self._lock:
            if signature == self.signature:
                self.count += 1
            else:
                self.signature, self.count = signature, 1

    def succeeded(self) -> None:
        with self._lock:
            self.signature, self.count = None, 0
