"""Phoenix's span dataframe as a file → the span objects spans.py reads, one a row.

`phoenix.client.Client().spans.get_spans_dataframe()` (arize-phoenix 20.26, and the
`px.TraceDataset(df).save()` file made of it) has one row a span: `name`, `span_kind`,
`parent_id`, `start_time`, `end_time`, `status_code`, `status_message`, `events`,
`context.span_id`, `context.trace_id` and the attributes flattened to their first list
(`attributes.input.value`, `attributes.retrieval.documents` holding a list of documents,
…), indexed by `context.span_id`. Saved as

- Parquet: lists and objects stay lists and structs (a struct carries every key any row
  has: the missing ones are null, and nulls are dropped here as JSON lines never had them);
  the index comes back as its own column, named as pandas recorded it;
- CSV (`df.to_csv()`): every cell is text — the index written first, so `context.span_id`
  appears twice; nested values as Python reprs (`[{'document.content': …}]`) or JSON. The
  attributes ragspan reads as lists (`retrieval.documents`, `llm.output_messages`) are
  parsed as JSON or a Python literal (an error naming the row and column otherwise); other
  cells are parsed only when they are a Python literal and not JSON text (a JSON string is
  what a string attribute such as `input.value` holds).

Rows are numbered from 1 (CSV: the data record, header excluded), as errors name them.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import math
from datetime import date, datetime
from pathlib import Path
from typing import Any

from ragspan.tasks.errors import InputError

ID_COLUMNS = ("context.span_id", "context.trace_id")
# Attributes ragspan reads as a list: their CSV text must parse.
LIST_COLUMNS = ("attributes.retrieval.documents", "attributes.llm.output_messages")
# The columns ragspan reads; any of them missing is noted in the report ("a|b": either).
READ_COLUMNS = ("parent_id", "span_kind|attributes.openinference.span.kind", "attributes.input.value",
                "attributes.retrieval.documents", "attributes.llm.output_messages|attributes.output.value")


def looks_like_csv_table(text: str) -> bool:
    """A CSV span table: its header (first line) names `context.span_id` as a column."""
    return "context.span_id" in csv_header(text)


def csv_header(text: str) -> list[str]:
    """The columns of the first line if it reads as a CSV header of two or more names (not
    the start of JSON), else []."""
    first = text.lstrip("\ufeff").split("\n", 1)[0].rstrip("\r")
    if first.lstrip().startswith(("{", "[")):
        return []
    try:
        header = next(csv.reader([first]), [])
    except csv.Error:
        return []
    return header if len(header) > 1 and all(h.strip() for h in header) else []


def parquet_rows(path: Path, raw: bytes) -> tuple[list[tuple[int, dict]], list[str]]:
    """(row, span object) per row of a Parquet span table, and its column names."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(io.BytesIO(raw))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(path, None, None, f"cannot read Parquet: {exc}") from None
    names = _with_index_names(table)
    rows = []
    for i, rec in enumerate(table.to_pylist(), 1):
        obj = {}
        for raw_name, value in rec.items():
            name = names.get(raw_name, raw_name)
            value = _plain(value)
            if name is not None and value is not None:
                obj[name] = value
        rows.append((i, obj))
    return rows, [n for n in (names.get(c, c) for c in table.column_names) if n is not None]


def _with_index_names(table: Any) -> dict[str, str | None]:
    """pandas stores a named index that clashes with a column as `__index_level_N__`: such a
    copy is dropped; an index whose name is no column is named."""
    meta = table.schema.pandas_metadata or {}
    out: dict[str, str | None] = {}
    for col in meta.get("columns", []):
        field = col.get("field_name")
        if isinstance(field, str) and field.startswith("__index_level_"):
            name = col.get("name")
            out[field] = name if isinstance(name, str) and name not in table.column_names else None
    return out


def _plain(value: Any) -> Any:
    """Arrow's Python values as JSON's: times as ISO text, NaN and nulls gone."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: v for k, v in ((k, _plain(v)) for k, v in value.items()) if v is not None}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def csv_rows(path: Path, text: str) -> tuple[list[tuple[int, dict]], list[str]]:
    """(row, span object) per data record of a CSV span table, and its column names."""
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff"), newline=""))
    try:
        header = next(reader, [])
        records = list(reader)
    except csv.Error as exc:
        raise InputError(path, reader.line_num, None, f"cannot parse CSV: {exc}") from None
    rows = []
    for i, cells in enumerate(records, 1):
        if not any(cells):
            continue
        if len(cells) != len(header):
            raise InputError(path, i, None, f"{len(cells)} fields where the header has {len(header)}")
        obj: dict[str, Any] = {}
        for name, cell in zip(header, cells, strict=True):
            if cell == "":
                continue
            if name in obj and obj[name] != cell:
                raise InputError(path, i, name, f"the column appears twice with different values "
                                                f"({obj[name]!r}, {cell!r})")
            obj[name] = _cell(path, i, name, cell)
        rows.append((i, obj))
    return rows, list(dict.fromkeys(header))


def _cell(path: Path, row: int, name: str, cell: str) -> Any:
    if not name.startswith("attributes.") or not cell.lstrip().startswith(("[", "{")):
        return cell
    if name in LIST_COLUMNS:
        try:
            return json.loads(cell)
        except ValueError:
            pass
    elif _is_json(cell):
        return cell  # a string attribute holding JSON text, as `input.value` does
    try:
        return ast.literal_eval(cell.strip())  # pandas wrote str(value): a Python literal
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        if name in LIST_COLUMNS:
            raise InputError(path, row, name, f"expected a list (JSON or a Python literal), got text "
                                              f"{cell[:40]!r}") from None
        return cell


def _is_json(cell: str) -> bool:
    try:
        json.loads(cell)
    except ValueError:
        return False
    return True


def check_columns(path: Path, columns: list[str]) -> list[str]:
    """An error when the table has no span ids; else a note for each read column it lacks."""
    for name in ID_COLUMNS:
        if name not in columns:
            raise InputError(path, None, name, f"no such column: not a span table (Phoenix's span dataframe "
                                               f"has context.span_id, context.trace_id, parent_id, span_kind, "
                                               f"attributes.*); columns: {', '.join(columns) or 'none'}")
    lacking = [c.replace("|", " or ") for c in READ_COLUMNS
               if not any(n in columns or any(k.startswith(n + ".") for k in columns) for n in c.split("|"))]
    return [f"the span table has no column {', '.join(lacking)}"] if lacking else []
