"""OpenInference traces → Imported records, one per trace.

Input: the spans of a trace export in any layout an exporter writes (json_objects.py: one
object a line, objects one after another, pretty or not, a JSON array), each a span in the
OpenInference shape or an OTLP/JSON export request (spans.py); or Phoenix's span
dataframe saved as Parquet or CSV (span_table.py), one span a row. What the file is
decides, not its name; any other binary format is refused in one line (file_kinds.py).
Names as in openinference-semantic-conventions 0.1.42.

Per trace (spans grouped by trace id, nested at any depth):

    question   the root span's `input.value` (a JSON input: its query/question/input key)
    answer     the last LLM span's output: its last `llm.output_messages.N.message.content`,
               else `output.value` (a JSON output: choices[0].message.content)
    retrieved  every RETRIEVER span's `retrieval.documents` in order (content, score); the
               document's ids to look in: `document.id`, then `document.metadata.KEY` for
               each KEY of `doc_id_keys` (DEFAULT_ID_KEYS unless the user names one)

A trace without an LLM output is skipped and listed; traces without a retriever (an LLM
call instrumented twice arrives as a trace of its own; an index being built) are counted
in a note each kind, not listed. Every
attribute ragspan does not read is counted in `fields_not_mapped`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from ragspan.tasks.errors import InputError
from ragspan.tasks.inputs.imports import DEFAULT_ID_KEYS, span_table, values
from ragspan.tasks.inputs.imports.file_kinds import PARQUET, kind_of, not_read, read_bytes
from ragspan.tasks.inputs.imports.json_objects import read_objects
from ragspan.tasks.inputs.imports.model import Context, Imported, Parsed, Skipped
from ragspan.tasks.inputs.imports.spans import Span, spans_of
from ragspan.tasks.inputs.load.files import _decode

_DOC = re.compile(r"^retrieval\.documents\.(\d+)\.document\.(id|content|score|metadata)(?:\.(.+))?$")
_OUT_MSG = re.compile(r"^llm\.output_messages\.(\d+)\.message\.(role|content)$")
_QUESTION_KEYS = ("question", "query", "user_input", "input", "text")
# The attributes ragspan reads (list indices as N), by the span's part in the trace;
# document metadata keys are judged one by one (_unread).
_READ = {
    "any": re.compile(r"^openinference\.span\.kind$"),
    "root": re.compile(r"^input\.(value|mime_type)$"),
    "LLM": re.compile(r"^(output\.(value|mime_type)|llm\.output_messages\.N\.message\.(role|content))$"),
    "RETRIEVER": re.compile(r"^(input\.value|retrieval\.documents\.N\.document\.(id|content|score|metadata))$"),
}
_INDEX = re.compile(r"(?<=\.)\d+(?=\.|$)")


def parse(path: Path, doc_id_keys: tuple[str, ...] = DEFAULT_ID_KEYS) -> Parsed:
    path = Path(path)
    objects, notes = _objects(path, read_bytes(path))
    traces: dict[str, list[Span]] = {}
    for line, rec in objects:
        for span in spans_of(path, line, rec):
            traces.setdefault(span.trace_id, []).append(span)
    if not traces:
        raise InputError(path, None, None, "no spans")
    out = Parsed(records=[], notes=notes)
    not_answers = Counter[str]()
    for trace_id, spans in traces.items():
        _trace(path, trace_id, spans, doc_id_keys, out, not_answers)
        root = _root(spans)
        for span in spans:
            out.unmapped.update(_unread(span, span is root, doc_id_keys))
    if not_answers["llm_spans"]:
        out.notes.append(f"LLM spans without a retriever in the same trace: {not_answers['llm_spans']}")
    if not_answers["traces"]:
        out.notes.append(f"traces with neither a retriever nor an LLM span: {not_answers['traces']}")
    return out


def _objects(path: Path, raw: bytes) -> tuple[list[tuple[int, dict]], list[str]]:
    """The file's span objects (row, object) by what the file is, and notes on what a span
    table lacks."""
    found = kind_of(raw)
    if found == PARQUET:
        rows, columns = span_table.parquet_rows(path, raw)
        return rows, span_table.check_columns(path, columns)
    if found is not None:
        raise not_read(path, found, "openinference")
    text = _decode(path, raw, 0)
    if span_table.looks_like_csv_table(text):
        rows, columns = span_table.csv_rows(path, text)
        return rows, span_table.check_columns(path, columns)
    header = span_table.csv_header(text)
    if header:
        raise not_read(path, "CSV", "openinference",
                       f"a CSV table without a context.span_id column (columns: {', '.join(header)})")
    return read_objects(path, raw), []


def _trace(path: Path, trace_id: str, spans: list[Span], keys: tuple[str, ...], out: Parsed,
           not_answers: Counter[str]) -> None:
    """Adds the trace's record (or why it was skipped) to `out`. A trace without a retriever
    was never an answer (an LLM call traced twice, an index being built): it is counted in
    `not_answers` — its LLM spans, or the trace — not listed one by one."""
    where = f"trace {trace_id}"
    root = _root(spans)
    retrievers = sorted((s for s in spans if s.kind == "RETRIEVER"), key=_order)
    llms = sorted((s for s in spans if s.kind == "LLM"), key=lambda s: (_key(s.end), _order(s)))
    # Bad documents are errors whether the trace is kept or not.
    documents = [_documents(path, r, keys) for r in retrievers]
    if not retrievers:
        not_answers.update({"llm_spans": len(llms)} if llms else {"traces": 1})
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
    # A retriever nested in another often carries the documents alone: only retrievers
    # that carried documents are ranked, and a note is due only when two or more did.
    carrying = [docs for docs in documents if docs]
    if len(carrying) > 1:
        out.notes.append(f"{where}: {len(carrying)} RETRIEVER spans carried documents; they are ranked "
                         "one after another")
    out.records.append(Imported(question_id=trace_id, question=question, answer=answer,
                                contexts=tuple(c for docs in carrying for c in docs), source=where))


def _root(spans: list[Span]) -> Span:
    """The earliest span whose parent is not in the trace."""
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if not s.parent_id or s.parent_id not in ids]
    return min(roots or spans, key=_order)


def _documents(path: Path, span: Span, keys: tuple[str, ...]) -> list[Context]:
    docs: dict[int, dict[str, Any]] = {}
    for key, value in span.attributes.items():
        m = _DOC.match(key)
        if m:
            i, name, sub = int(m.group(1)), m.group(2), m.group(3)
            if sub is None:
                docs.setdefault(i, {})[name] = value
            elif name == "metadata":  # metadata given as an object, flattened
                docs.setdefault(i, {}).setdefault("metadata_keys", {})[sub] = value
    out = []
    for i in sorted(docs):
        d = docs[i]
        field = f"attributes.retrieval.documents.{i}.document.%s"
        text = values.text(path, span.line, field % "content", d.get("content"), optional=True) or ""
        found: list[tuple[str, str]] = []
        if d.get("id") is not None:
            found.append(("document.id", _id(path, span.line, field % "id", d["id"])))
        metadata = {**_metadata(d.get("metadata")), **d.get("metadata_keys", {})}
        for key in keys:
            value = metadata.get(key)
            if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
                found.append((f"document.metadata.{key}", str(value)))
        score = values.score(path, span.line, field % "score", d["score"]) if "score" in d else None
        out.append(Context(text=text, ids=tuple(found), score=score))
    return out


def _metadata(value: Any) -> dict[str, Any]:
    """OpenInference writes a document's metadata as a JSON string; an object is taken too."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _id(path: Path, line: int, field: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InputError(path, line, field, "expected a string or an integer")
    return str(value)


def _unread(span: Span, is_root: bool, keys: tuple[str, ...]) -> Counter[str]:
    """The span's attributes ragspan does not read, list indices as N, each counted once;
    of the documents' metadata, the keys other than the id keys tried."""
    read = [_READ["any"], *([_READ["root"]] if is_root else []), *([_READ[span.kind]] if span.kind in _READ else [])]
    names = set()
    for key, value in span.attributes.items():
        name = _INDEX.sub("N", key)
        m = _DOC.match(key)
        if m and m.group(2) == "metadata":
            sub = [m.group(3)] if m.group(3) else list(_metadata(value))
            names.update(f"retrieval.documents.N.document.metadata.{k}" for k in sub
                         if k.split(".")[0] not in keys)
        elif not any(r.match(name) for r in read):
            names.add(name)
    return Counter(names)


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
