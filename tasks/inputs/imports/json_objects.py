"""The JSON objects of a trace export, in whichever layout the exporter chose.

Exporters disagree on layout: Phoenix and `span.to_json(indent=None)` write one object a
line; OpenTelemetry's `ConsoleSpanExporter()` writes pretty-printed objects one after
another; `MessageToJson(request)` writes one pretty object; some tools write a JSON array.
All of them are read here the same way, whatever the file's suffix: a top-level array's
elements, else the objects one after another (a line holding one object is the simplest
case). Each object comes with the line it starts on, which is what errors name as its row.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import NoReturn

from ragspan.tasks.errors import InputError
from ragspan.tasks.inputs.load.files import (
    _SURROGATE_ESCAPE,
    _decode,
    _lone_surrogate_field,
    _reject_constant,
    _unique_keys,
)

FORMS = ("one JSON object a line, JSON objects one after another (pretty-printed or not), "
         "a JSON array of objects, or an OTLP ExportTraceServiceRequest; or a span table as Parquet or CSV "
         "with Phoenix's columns (context.span_id, …)")
_SPACE = re.compile(r"[ \t\r\n]*")
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_unique_keys)


def read_objects(path: Path, raw: bytes) -> list[tuple[int, dict]]:
    """(line the object starts on, object) for every top-level object of the file; an
    InputError naming the line and column, and the forms accepted, on anything else."""
    text = _decode(path, raw, 0)
    pos = _SPACE.match(text, 0).end()  # type: ignore[union-attr]  # matches the empty string
    found: list[tuple[int, dict]] = []  # (position, object)
    if pos < len(text) and text[pos] == "[":
        _array(path, text, pos + 1, found)
    else:
        while pos < len(text):
            obj, end = _one(path, text, pos)
            found.append((pos, obj))
            pos = _SPACE.match(text, end).end()  # type: ignore[union-attr]
    return _with_lines(text, found)


def _with_lines(text: str, found: list[tuple[int, dict]]) -> list[tuple[int, dict]]:
    """Positions → line numbers in one pass (counting from the start for each object
    would be quadratic in a large export)."""
    out, line, last = [], 1, 0
    for pos, obj in found:
        line += text.count("\n", last, pos)
        last = pos
        out.append((line, obj))
    return out


def _array(path: Path, text: str, pos: int, out: list[tuple[int, dict]]) -> None:
    pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
    if text.startswith("]", pos):
        return
    while True:
        obj, end = _one(path, text, pos)
        out.append((pos, obj))
        pos = _SPACE.match(text, end).end()  # type: ignore[union-attr]
        if text.startswith(",", pos):
            pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
        elif text.startswith("]", pos):
            rest = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
            if rest < len(text):
                _fail(path, text, rest, rest, "text after the closing ']' of the array")
            return
        else:
            _fail(path, text, pos, pos, "expected ',' or ']' in the array")


def _one(path: Path, text: str, pos: int) -> tuple[dict, int]:
    try:
        obj, end = _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        _fail(path, text, pos, exc.pos, exc.msg)
    except ValueError as exc:  # a duplicate key or NaN, raised by the hooks
        _fail(path, text, pos, pos, str(exc))
    except RecursionError:
        _fail(path, text, pos, pos, "nested too deeply")
    if not isinstance(obj, dict):
        _fail(path, text, pos, pos, f"expected a JSON object, got {type(obj).__name__}")
    if _SURROGATE_ESCAPE.search(text, pos, end):
        field = _lone_surrogate_field(obj)
        if field is not None:
            raise InputError(path, _line(text, pos), field,
                             "lone UTF-16 surrogate escape (e.g. \\ud800): not a Unicode character")
    return obj, end


def _fail(path: Path, text: str, start: int, pos: int, why: str) -> NoReturn:
    """The row is the line the object starts on; the message says where it broke."""
    line = _line(text, pos)
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    raise InputError(path, _line(text, start), None, f"not valid JSON at line {line}, column {column} ({why}); "
                                       f"accepted: {FORMS}")


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1
