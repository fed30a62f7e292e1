"""Reading a table file a batch of records at a time: JSONL, CSV and Parquet, strictly
(as tasks/inputs/load/files.py reads a file whole: UTF-8 without newline translation,
duplicate keys, NaN and lone surrogates refused; every CSV cell as text), with each
record's row number as errors name it. What the corpus store and the chunk table are
read with: a file of any size costs the heap of one batch."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.json as pajson
import pyarrow.parquet as pq
from ragspan.tasks.errors import InputError
from ragspan.tasks.inputs.load.files import (
    _BOM,
    TABLE_SUFFIXES,
    _check_csv_header,
    _decode,
    jsonl_decoder,
    jsonl_record,
)

BATCH_BYTES = 32 << 20  # input bytes parsed per batch: the heap a read needs
ROW_BYTES = 4096  # CSV and Parquet are read by rows: a document's bytes, about

@dataclass
class Batch:
    """Records of one read batch: their row numbers (as errors name them) and columns."""

    rows: list[int]
    columns: Mapping[str, list]
    csv: bool = False
    typed: dict[str, pd.Series] = field(default_factory=dict)  # Parquet's columns, Arrow types kept
    arrow: pa.Table | None = None  # the batch parsed by Arrow (jsonl_arrow_batches), its columns exactly as typed


class ArrowColumns(Mapping[str, list]):
    """An Arrow-parsed batch's columns as lists, each made when first asked for: only
    where a vectorised check declines and the per-record checks run."""

    def __init__(self, table: pa.Table) -> None:
        self._table = table
        self._lists: dict[str, list] = {}

    def __getitem__(self, name: str) -> list:
        if name not in self._table.column_names:
            raise KeyError(name)
        if name not in self._lists:
            self._lists[name] = self._table.column(name).to_pylist()
        return self._lists[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table.column_names)

    def __len__(self) -> int:
        return self._table.num_columns


def table_batches(path: Path, batch_bytes: int) -> Iterator[Batch]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _jsonl_batches(path, batch_bytes)
    if suffix == ".csv":
        return _csv_batches(path, max(1, batch_bytes // ROW_BYTES))
    if suffix == ".parquet":
        return _parquet_batches(path, max(1, batch_bytes // ROW_BYTES))
    raise InputError(path, None, None, f"unsupported file type '{path.suffix}' (use {', '.join(TABLE_SUFFIXES)})")


def _jsonl_batches(path: Path, batch_bytes: int) -> Iterator[Batch]:
    """Records a batch at a time; lines split on b"\\n" only (as the whole-file reader)."""
    loads = jsonl_decoder()
    records: list[dict] = []
    rows: list[int] = []
    size, yielded = 0, False
    with opened(path) as f:
        for lineno, raw in enumerate(f, start=1):
            if lineno == 1:
                raw = raw.removeprefix(_BOM)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                bad = raw[exc.start : exc.start + 1].hex()
                raise InputError(path, lineno, None, f"not valid UTF-8: byte 0x{bad} at line {lineno}") from None
            obj = jsonl_record(path, lineno, line.removesuffix("\n"), loads)
            if obj is None:
                continue
            records.append(obj)
            rows.append(lineno)
            size += len(raw)
            if size >= batch_bytes:
                yield _records_batch(rows, records)
                records, rows, size, yielded = [], [], 0, True
    if records or not yielded:  # no record at all: one empty batch (the missing-column error)
        yield _records_batch(rows, records)


# Bytes a strict JSON parse rejects inside strings and Arrow's parser may not: control
# characters (\t and \r too: legal between tokens, but a block holding one is simply read
# the strict way).
_CONTROL_BYTES = re.compile(rb"[\x00-\x09\x0b-\x1f]")


def jsonl_arrow_batches(path: Path, batch_bytes: int, schema: pa.Schema) -> Iterator[Batch]:
    """A JSONL table a block of lines at a time, each block parsed by Arrow's JSON reader
    (C++, ~50× the per-line Python parse) when it provably reads as the strict per-line
    reader would read it — valid UTF-8, no control byte, no blank line, no repeated key or
    lone surrogate (Arrow refuses both), exactly `schema`'s columns with its types and no
    null — else by the strict reader, line by line, with its errors. A block accepted here
    gives the values json.loads would give (strings and 64-bit integers only: a NaN or an
    integer beyond int64 is a double, and declined). Row numbers are line numbers, as there."""
    loads = jsonl_decoder()
    line, yielded = 1, False
    with opened(path) as f:
        while block := f.read(batch_bytes):
            if not block.endswith(b"\n"):
                block += f.readline()  # whole lines only
            if line == 1:
                block = block.removeprefix(_BOM)
            lines = block.count(b"\n") + (not block.endswith(b"\n"))
            table = _arrow_block(block, lines, schema)
            batch = (Batch(list(range(line, line + lines)), ArrowColumns(table), arrow=table) if table is not None
                     else _lines_batch(path, block, line, loads))
            line += lines
            if batch.rows:
                yielded = True
                yield batch
    if not yielded:  # no record at all: one empty batch (the missing-column error)
        yield _records_batch([], [])


def _arrow_block(block: bytes, lines: int, schema: pa.Schema) -> pa.Table | None:
    """The block as a table of `schema` when Arrow reads it as the strict reader would; else None."""
    if _CONTROL_BYTES.search(block):
        return None
    try:
        block.decode("utf-8")  # Arrow's reader passes invalid UTF-8 through
        table = pajson.read_json(pa.BufferReader(block))
    except (UnicodeDecodeError, pa.ArrowInvalid):
        return None
    if table.num_rows != lines or sorted(table.column_names) != sorted(schema.names):
        return None  # a blank line (skipped by Arrow), a missing or extra key
    if any(table.column(f.name).type != f.type or table.column(f.name).null_count for f in schema):
        return None
    return table.select(schema.names).combine_chunks()


def _lines_batch(path: Path, block: bytes, first_line: int, loads: Any) -> Batch:
    """A block of whole lines read the strict way (as _jsonl_batches reads each line)."""
    records: list[dict] = []
    rows: list[int] = []
    parts = block.split(b"\n")
    if block.endswith(b"\n"):
        parts.pop()
    for lineno, raw in enumerate(parts, start=first_line):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = raw[exc.start : exc.start + 1].hex()
            raise InputError(path, lineno, None, f"not valid UTF-8: byte 0x{bad} at line {lineno}") from None
        obj = jsonl_record(path, lineno, text, loads)
        if obj is not None:
            records.append(obj)
            rows.append(lineno)
    return _records_batch(rows, records)


def _records_batch(rows: list[int], records: list[dict]) -> Batch:
    keys: dict[str, None] = {}  # union of keys, in order of first appearance
    for rec in records:
        keys.update(dict.fromkeys(rec))
    return Batch(rows, {k: [r.get(k) for r in records] for k in keys})


def _csv_batches(path: Path, batch_rows: int) -> Iterator[Batch]:
    """Rows a batch at a time, every cell as text (empties ""), as the whole-file reader."""
    with opened(path) as raw:
        head = raw.read(1 << 16)
    try:
        head_text = head.removeprefix(_BOM).decode("utf-8", errors="ignore")
    except UnicodeDecodeError:  # pragma: no cover - errors="ignore"
        head_text = ""
    if not head_text.strip():
        yield Batch([], {}, csv=True)  # no header: no column (the missing-column error)
        return
    first = head_text.split("\n", 1)[0] + "\n"
    _check_csv_header(path, first)
    header = next(csv.reader(io.StringIO(first)), [])
    start = 1
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            reader = pd.read_csv(f, dtype=str, keep_default_na=False, chunksize=batch_rows)
            for part in reader:
                rows = list(range(start, start + len(part)))
                start += len(part)
                yield Batch(rows, {str(c): part[c].tolist() for c in part.columns}, csv=True)
    except UnicodeDecodeError:
        _raise_bad_utf8(path, header_lines=1)
    except (pd.errors.ParserError, ValueError) as exc:
        raise InputError(path, None, None, f"cannot parse CSV: {exc}") from None
    if start == 1:  # a header only: its columns, no record
        yield Batch([], {c: [] for c in header}, csv=True)


def _raise_bad_utf8(path: Path, header_lines: int) -> None:
    """The whole-file reader's error for the first byte that is not UTF-8, found a line
    at a time (only on this error's path)."""
    with opened(path) as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                _decode(path, b"\n" * (lineno - 1) + raw, header_lines)
    raise InputError(path, None, None, "not valid UTF-8")  # pragma: no cover - found above


def _parquet_batches(path: Path, batch_rows: int) -> Iterator[Batch]:
    start = 1
    try:
        parquet = pq.ParquetFile(path)
        names = parquet.schema_arrow.names
        for part in parquet.iter_batches(batch_size=batch_rows):
            frame = part.to_pandas()
            rows = list(range(start, start + len(frame)))
            start += len(frame)
            yield Batch(rows, {str(c): frame[c].tolist() for c in frame.columns},
                        typed={str(c): frame[c] for c in frame.columns})
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(path, None, None, f"cannot read Parquet: {exc}") from None
    if start == 1:
        yield Batch([], {c: [] for c in names})


def raise_missing_columns(source: Path, batch: Batch, columns: dict[str, None], rest: Iterator[Batch],
                          required: tuple[str, ...]) -> None:
    """InputError when a required column is absent — what a whole-file read reports before
    any row's problem. `columns`: the names met so far (updated here). CSV and Parquet
    name their columns once (the header); a JSONL record carries its own keys, so a
    column is missing only if no later record has it: read on (on this error's path only)."""
    columns.update(dict.fromkeys(batch.columns))
    missing = [c for c in required if c not in columns]
    if not missing:
        return
    have = lambda: ", ".join(columns) or "none"
    if source.suffix.lower() != ".jsonl":
        raise InputError(source, None, missing[0], f"missing required column in the header (columns found: {have()})")
    for later in rest:
        columns.update(dict.fromkeys(later.columns))
    still = [c for c in missing if c not in columns]
    if still:
        first_row = batch.rows[0] if batch.rows else None
        raise InputError(source, first_row, still[0], f"missing required column (columns found: {have()})")


def opened(path: Path) -> Any:
    try:
        return open(path, "rb")
    except OSError as exc:
        raise InputError(path, None, None, f"cannot read file: {exc.strerror or exc}") from None
