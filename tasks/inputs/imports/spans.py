"""Spans out of the JSON objects of a trace export (json_objects.py), in either shape:

- the OpenInference / OpenTelemetry SDK span (`span.to_json()`, Phoenix's export):
  `context.trace_id`, `context.span_id`, `parent_id`, `span_kind` or the
  `openinference.span.kind` attribute, `start_time`, `end_time`, `attributes` (flat, lists of
  flat objects, or nested);
- an OTLP `ExportTraceServiceRequest` as JSON (`resourceSpans` → `scopeSpans` → `spans`, or
  the proto field names `resource_spans`, … that `MessageToJson(preserving_proto_field_name=
  True)` writes), attributes as `{key, value: {stringValue|intValue|…}}`.

Ids are normalised so one trace reads the same from any exporter: the SDK's `0x…` hex and
protobuf JSON's base64 (`MessageToJson` encodes bytes so) both become plain lowercase hex.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragspan.tasks.errors import InputError

_HEX = re.compile(r"^(?:0x)?([0-9a-fA-F]{16}|[0-9a-fA-F]{32})$")


@dataclass(frozen=True)
class Span:
    line: int  # the line its object starts on: what errors name as the row
    trace_id: str
    span_id: str
    parent_id: str | None
    kind: str
    start: Any
    end: Any
    attributes: dict[str, Any]  # flat: "a.b.0.c" keys


def spans_of(path: Path, line: int, rec: dict) -> Iterator[Span]:
    """The spans one top-level object holds: an OTLP request's many, or itself."""
    resource_spans = _either(rec, "resourceSpans", "resource_spans")
    if resource_spans is not None:
        yield from _otlp_spans(path, line, resource_spans)
        return
    flat = flatten(rec)
    # A null attribute carries nothing (a table's empty cell, a struct's missing key).
    attrs = {k[len("attributes."):]: v for k, v in flat.items() if k.startswith("attributes.") and v is not None}
    trace_id = _first(flat, "context.trace_id", "trace_id", "traceId")
    span_id = _first(flat, "context.span_id", "span_id", "spanId")
    if not isinstance(trace_id, str) or not trace_id:
        raise InputError(path, line, "context.trace_id", "missing: not an OpenInference span (no trace id)")
    if not isinstance(span_id, str) or not span_id:
        raise InputError(path, line, "context.span_id", "missing: not an OpenInference span (no span id)")
    parent = _first(flat, "parent_id", "parent_span_id", "parentSpanId")
    kind = _first(flat, "span_kind") or attrs.get("openinference.span.kind") or ""
    yield Span(line, hex_id(trace_id), hex_id(span_id),
               hex_id(parent) if isinstance(parent, str) and parent else None,
               str(kind).upper(), _first(flat, "start_time"), _first(flat, "end_time"), attrs)


def hex_id(value: str) -> str:
    """A trace or span id as lowercase hex: `0x…` and base64 (16 or 8 bytes) are converted;
    any other string (a hand-written id) is kept as it is."""
    m = _HEX.match(value)
    if m:
        return m.group(1).lower()
    if len(value) in (12, 24):  # base64 of 8 or 16 bytes, padded
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return value
        if len(raw) in (8, 16):
            return raw.hex()
    return value


def _otlp_spans(path: Path, line: int, resource_spans: Any) -> Iterator[Span]:
    for i, rs in enumerate(_list(path, line, "resourceSpans", resource_spans)):
        scope_spans = _either(rs, "scopeSpans", "scope_spans") if isinstance(rs, dict) else None
        for j, ss in enumerate(_list(path, line, f"resourceSpans[{i}].scopeSpans", scope_spans or [])):
            raw = ss.get("spans", []) if isinstance(ss, dict) else None
            where = f"resourceSpans[{i}].scopeSpans[{j}].spans"
            for k, sp in enumerate(_list(path, line, where, raw)):
                yield _otlp_span(path, line, f"{where}[{k}]", sp)


def _otlp_span(path: Path, line: int, where: str, sp: Any) -> Span:
    trace_id = _either(sp, "traceId", "trace_id") if isinstance(sp, dict) else None
    span_id = _either(sp, "spanId", "span_id") if isinstance(sp, dict) else None
    if not isinstance(trace_id, str) or not trace_id or not isinstance(span_id, str) or not span_id:
        raise InputError(path, line, f"{where}.traceId", "missing: an OTLP span needs traceId and spanId")
    attrs = flatten({kv.get("key", ""): _otlp_value(kv.get("value") or {})
                     for kv in sp.get("attributes") or [] if isinstance(kv, dict)})
    parent = _either(sp, "parentSpanId", "parent_span_id")
    return Span(line, hex_id(trace_id), hex_id(span_id),
                hex_id(parent) if isinstance(parent, str) and parent else None,
                str(attrs.get("openinference.span.kind", "")).upper(),
                _either(sp, "startTimeUnixNano", "start_time_unix_nano"),
                _either(sp, "endTimeUnixNano", "end_time_unix_nano"), attrs)


def _otlp_value(v: dict) -> Any:
    for name in ("stringValue", "string_value"):
        if name in v:
            return v[name]
    for name in ("intValue", "int_value"):
        if name in v:  # protobuf JSON writes 64-bit integers as strings
            return int(v[name]) if str(v[name]).lstrip("-").isdigit() else v[name]
    for name in ("doubleValue", "double_value"):
        if name in v:
            return float(v[name])
    for name in ("boolValue", "bool_value"):
        if name in v:
            return bool(v[name])
    array = _either(v, "arrayValue", "array_value")
    if array is not None:
        return [_otlp_value(x or {}) for x in (array or {}).get("values", [])]
    kvlist = _either(v, "kvlistValue", "kvlist_value")
    if kvlist is not None:
        return {kv.get("key", ""): _otlp_value(kv.get("value") or {}) for kv in (kvlist or {}).get("values", []) if isinstance(kv, dict)}
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


def _either(d: dict, camel: str, snake: str) -> Any:
    return d[camel] if d.get(camel) is not None else d.get(snake)


def _first(flat: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if flat.get(k) is not None:
            return flat[k]
    return None


def _list(path: Path, line: int, name: str, v: Any) -> list:
    if not isinstance(v, list):
        raise InputError(path, line, name, "expected a list")
    return v
