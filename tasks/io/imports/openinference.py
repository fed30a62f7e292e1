"""OpenInference traces → Imported records, one per trace.

Input: JSONL, one span per line, in the span shape of the OpenInference spec
(`spec/traces.md`: `name`, `context.trace_id`, `context.span_id`, `parent_id`,
`span_kind`, `start_time`, `attributes`; names as in openinference-semantic-conventions
0.1.42), which is also what Phoenix's span export returns; attributes flat (`"retrieval.documents.0.document.content"`), as lists of flat
objects (`"retrieval.documents": [{"document.content": …}]`) or nested
(`{"retrieval": {"documents": [{"document": {"content": …}}]}}`). A line may also be an
OTLP/JSON export request (`{"resourceSpans": …}`, as the OpenTelemetry collector's file
exporter writes), where the span kind is the `openinference.span.kind` attribute.

Per trace (spans grouped by trace id, nested at any depth):

    question   the root span's `input.value` (a JSON input: its query/question/input key)
    answer     the last LLM span's output: its last `llm.output_messages.N.message.content`,
               else `output.value` (a JSON output: choices[0].message.content)
    retrieved  every RETRIEVER span's `retrieval.documents` in order (id, content, score)

A trace without a retriever span or without an LLM output is skipped and listed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragspan.tasks.errors import InputError
from ragspan.tasks.io.imports import values
from ragspan.tasks.io.imports.model import Context, Imported, Parsed, Skipped
from ragspan.tasks.io.load.files import _decode, _jsonl_records

_DOC = re.compile(r"^retrieval\.documents\.(\d+)\.document\.(id|content|score)$")
_OUT_MSG = re.compile(r"^llm\.output_messages\.(\d+)\.message\.(role|content)$")
_QUESTION_KEYS = ("question", "query", "user_input", "input", "text")


@dataclass(frozen=True)
class Span:
    line: int
    trace_id: str
    span_id: str
    parent_id: str | None
    kind: str
    start: Any
    end: Any
    attributes: dict[str, Any]  # flat: "a.b.0.c" keys


def parse(path: Path) -> Parsed:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(path, None, None, f"cannot read file: {exc.strerror or exc}") from None
    if path.suffix.lower() not in (".jsonl", ".json"):
        raise InputError(path, None, None, f"unsupported file type '{path.suffix}' (OpenInference spans: .jsonl)")
    records, lines = _jsonl_records(path, _decode(path, raw, 0))
    traces: dict[str, list[Span]] = {}
    for line, rec in zip(lines, records, strict=True):
        for span in _spans_of(path, line, rec):
            traces.setdefault(span.trace_id, []).append(span)
    if not traces:
        raise InputError(path, None, None, "no spans")
    out = Parsed(records=[])
    for trace_id, spans in traces.items():
        _trace(path, trace_id, spans, out)
    return out


def _trace(path: Path, trace_id: str, spans: list[Span], out: Parsed) -> None:
    where = f"trace {trace_id}"
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if not s.parent_id or s.parent_id not in ids]
    root = min(roots or spans, key=_order)
    retrievers = sorted((s for s in spans if s.kind == "RETRIEVER"), key=_order)
    llms = sorted((s for s in spans if s.kind == "LLM"), key=lambda s: (_key(s.end), _order(s)))
    contexts = [c for r in retrievers for c in _documents(path, r)]  # bad documents are errors, skipped or not
    if not retrievers:
        out.skipped.append(Skipped(where, "no RETRIEVER span: nothing retrieved to judge against"))
        return
    answer = None
    for llm in reversed(llms):
        answer = _answer(llm)
        if answer:
            break
    if not answer:
        out.skipped.append(Skipped(where, "no LLM span with an output: no answer" if not llms else
                                   "the LLM spans have no output text: no answer"))
        return
    question = _question(root)
    if question is None:
        question = _text(retrievers[0].attributes.get("input.value")) or ""
        out.notes.append(f"{where}: the root span has no text input; the question is the retriever's query")
    if len(retrievers) > 1:
        out.notes.append(f"{where}: {len(retrievers)} RETRIEVER spans; their documents are ranked one after another")
    for s in spans:
        if s.kind == "RERANKER":
            out.unmapped["reranker.output_documents"] += 1
    out.records.append(Imported(question_id=trace_id, question=question, answer=answer,
                                contexts=tuple(contexts), source=where))


def _documents(path: Path, span: Span) -> list[Context]:
    docs: dict[int, dict[str, Any]] = {}
    for key, value in span.attributes.items():
        m = _DOC.match(key)
        if m:
            docs.setdefault(int(m.group(1)), {})[m.group(2)] = (key, value)
    out = []
    for i in sorted(docs):
        d = docs[i]
        field = "attributes.retrieval.documents.%d.document.%s"
        content = d.get("content", ("", None))[1]
        text = values.text(path, span.line, field % (i, "content"), content, optional=True) or ""
        doc_id = None
        if "id" in d and d["id"][1] is not None:
            raw_id = d["id"][1]
            if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
                raise InputError(path, span.line, field % (i, "id"), "expected a string or an integer")
            doc_id = str(raw_id)
        score = values.score(path, span.line, field % (i, "score"), d["score"][1]) if "score" in d else None
        out.append(Context(text=text, doc_id=doc_id, score=score))
    return out


def _answer(span: Span) -> str | None:
    messages: dict[int, dict[str, Any]] = {}
    for key, value in span.attributes.items():
        m = _OUT_MSG.match(key)
        if m:
            messages.setdefault(int(m.group(1)), {})[m.group(2)] = value
    for i in sorted(messages, reverse=True):
        content = _text(messages[i].get("content"))
        if content and messages[i].get("role", "assistant") == "assistant":
            return content
    value = _text(span.attributes.get("output.value"))
    if value and span.attributes.get("output.mime_type") == "application/json":
        try:
            body = json.loads(value)
            return _text(body["choices"][0]["message"]["content"])
        except (ValueError, KeyError, IndexError, TypeError):
            return None
    return value


def _question(span: Span) -> str | None:
    value = _text(span.attributes.get("input.value"))
    if value is None:
        return None
    if span.attributes.get("input.mime_type") == "application/json":
        try:
            body = json.loads(value)
        except ValueError:
            return value
        if isinstance(body, dict):
            for k in _QUESTION_KEYS:
                if isinstance(body.get(k), str):
                    return body[k]
            return None
        return body if isinstance(body, str) else None
    return value


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) and v.strip() else None


def _order(s: Span) -> tuple:
    return (_key(s.start), s.line)


def _key(v: Any) -> tuple:
    # ISO strings and OTLP nanosecond numbers each sort on their own; a missing time sorts first.
    if v is None:
        return (0, "")
    return (1, f"{int(v):024d}") if isinstance(v, int | float) or (isinstance(v, str) and v.isdigit()) else (1, str(v))


# -- reading spans --------------------------------------------------------------------------


def _spans_of(path: Path, line: int, rec: dict) -> Iterator[Span]:
    if "resourceSpans" in rec:
        for rs in _list(path, line, "resourceSpans", rec["resourceSpans"]):
            for ss in _list(path, line, "scopeSpans", (rs or {}).get("scopeSpans", [])):
                for sp in _list(path, line, "spans", (ss or {}).get("spans", [])):
                    yield _otlp_span(path, line, sp)
        return
    flat = flatten(rec)
    attrs = {k[len("attributes."):]: v for k, v in flat.items() if k.startswith("attributes.")}
    trace_id = _first(flat, "context.trace_id", "trace_id", "traceId")
    span_id = _first(flat, "context.span_id", "span_id", "spanId")
    if not isinstance(trace_id, str) or not trace_id:
        raise InputError(path, line, "context.trace_id", "missing: not an OpenInference span (no trace id)")
    if not isinstance(span_id, str) or not span_id:
        raise InputError(path, line, "context.span_id", "missing: not an OpenInference span (no span id)")
    parent = _first(flat, "parent_id", "parent_span_id", "parentSpanId")
    kind = _first(flat, "span_kind") or attrs.get("openinference.span.kind") or ""
    yield Span(line, trace_id, span_id, parent if isinstance(parent, str) and parent else None,
               str(kind).upper(), _first(flat, "start_time"), _first(flat, "end_time"), attrs)


def _otlp_span(path: Path, line: int, sp: Any) -> Span:
    if not isinstance(sp, dict) or not sp.get("traceId") or not sp.get("spanId"):
        raise InputError(path, line, "resourceSpans[].scopeSpans[].spans[].traceId",
                         "missing: an OTLP span needs traceId and spanId")
    attrs = flatten({kv.get("key", ""): _otlp_value(kv.get("value") or {})
                     for kv in sp.get("attributes") or [] if isinstance(kv, dict)})
    return Span(line, str(sp["traceId"]), str(sp["spanId"]), sp.get("parentSpanId") or None,
                str(attrs.get("openinference.span.kind", "")).upper(), sp.get("startTimeUnixNano"),
                sp.get("endTimeUnixNano"), attrs)


def _otlp_value(v: dict) -> Any:
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [_otlp_value(x) for x in (v["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in v:
        return {kv["key"]: _otlp_value(kv.get("value") or {}) for kv in (v["kvlistValue"] or {}).get("values", [])}
    return None


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Nested objects and lists of objects as flat dotted keys (`a.b.0.c`); lists of plain
    values stay lists."""
    out: dict[str, Any] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}{k}."))
    elif isinstance(obj, list) and any(isinstance(x, dict | list) for x in obj):
        for i, v in enumerate(obj):
            out.update(flatten(v, f"{prefix}{i}."))
    else:
        out[prefix[:-1]] = obj
    return out


def _first(flat: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if flat.get(k) is not None:
            return flat[k]
    return None


def _list(path: Path, line: int, name: str, v: Any) -> list:
    if not isinstance(v, list):
        raise InputError(path, line, name, "expected a list")
    return v
