"""Reading data files strictly: UTF-8 without newline translation, JSONL/CSV/Parquet, duplicate keys and lone surrogates rejected; tables found by stem."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pyarrow_mod
import pyarrow.parquet as pq
from ragspan.tasks.errors import InputError

TABLE_SUFFIXES = (".jsonl", ".csv", ".parquet")
CORPUS_FILE_SUFFIXES = (".txt", ".md")
_BOM = b"\xef\xbb\xbf"
# Greedy `.*\s` matched inside [pos, endpos) ends just after the *last* whitespace:
# one C-level scan instead of a Python loop per chunk.
_LAST_WS = re.compile(r".*\s", re.DOTALL)

RUN_KEYS = frozenset({"question_id", "answer", "retrieved", "context_k", "claims"})
ITEM_OPTIONAL_KEYS = frozenset({"score", "in_context"})
ITEM_FORMS = (
    "{'chunk_id'}",
    "{'doc_id', 'char_start', 'char_end'}",
    "{'text', 'doc_id'?}",
)
_ITEM_KEYS = (
    frozenset({"chunk_id", "doc_id", "char_start", "char_end", "text"}) | ITEM_OPTIONAL_KEYS
)


# --------------------------------------------------------------------------- reading


def _decode(path: Path, raw: bytes, header_lines: int) -> str:
    """Strict UTF-8; the error names the record (line minus header lines) and the line."""
    raw = raw.removeprefix(_BOM)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        row = line - header_lines if line > header_lines else None
        bad = raw[exc.start : exc.start + 1].hex()
        raise InputError(path, row, None, f"not valid UTF-8: byte 0x{bad} at line {line}") from None


def _reject_constant(name: str) -> Any:
    # Python's json accepts NaN/Infinity; JSON does not, and NaN would pass as a number.
    raise ValueError(f"{name} is not valid JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    # Python's json keeps the last of two equal keys; a record saying two things is bad input.
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"duplicate key {dup!r}")
    return obj


# A JSON escape of a UTF-16 surrogate: either half of a pair (fine) or a lone one, which
# decodes to a str that cannot be encoded as UTF-8 (every output write would fail).
_SURROGATE_ESCAPE = re.compile(r"\\[uU][dD][89a-fA-F]")


def _lone_surrogate_field(obj: dict) -> str | None:
    """The first top-level key whose value holds a lone surrogate, else None."""
    for key, value in obj.items():
        try:
            json.dumps([key, value], ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return key
    return None


def jsonl_decoder() -> Callable[[str], Any]:
    """The strict JSON decoder of every JSONL line: no NaN/Infinity, no repeated key."""
    return json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_unique_keys).decode


def jsonl_record(path: Path, lineno: int, line: str, loads: Callable[[str], Any]) -> dict | None:
    """One JSONL line parsed: its object, None for a blank line; InputError naming the line."""
    if not line.strip():
        return None
    try:
        obj = loads(line)
    except ValueError as exc:
        detail = (
            f"{exc.msg} at column {exc.colno}"
            if isinstance(exc, json.JSONDecodeError)
            else str(exc)
        )
        raise InputError(path, lineno, None, f"not valid JSON ({detail})") from None
    except RecursionError:
        raise InputError(path, lineno, None, "not valid JSON (nested too deeply)") from None
    if not isinstance(obj, dict):
        raise InputError(
            path, lineno, None, f"expected a JSON object, got {type(obj).__name__}"
        )
    if _SURROGATE_ESCAPE.search(line):
        field = _lone_surrogate_field(obj)
        if field is not None:
            raise InputError(
                path, lineno, field,
                "lone UTF-16 surrogate escape (e.g. \\ud800): not a Unicode character",
            )
    return obj


def _jsonl_records(path: Path, text: str) -> tuple[list[dict], list[int]]:
    """Parse JSONL: one object per line; blank lines skipped; line numbers kept."""
    records: list[dict] = []
    lines: list[int] = []
    loads = jsonl_decoder()
    # Split on "\n" only: str.splitlines would also split on U+2028 etc., legal in JSON strings.
    for lineno, line in enumerate(text.split("\n"), start=1):
        obj = jsonl_record(path, lineno, line, loads)
        if obj is not None:
            records.append(obj)
            lines.append(lineno)
    return records, lines


def _read_with_hash(path: Path) -> tuple[pd.DataFrame, str]:
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise InputError(
            path,
            None,
            None,
            f"unsupported file type '{path.suffix}' (use .jsonl, .csv or .parquet)",
        )
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(path, None, None, f"cannot read file: {exc.strerror or exc}") from None
    digest = hashlib.md5(raw).hexdigest()

    if suffix == ".jsonl":
        records, lines = _jsonl_records(path, _decode(path, raw, 0))
        keys: dict[str, None] = {}  # union of keys, in order of first appearance
        for rec in records:
            keys.update(dict.fromkeys(rec))
        # object dtype keeps the JSON types exactly (no int -> float on a missing value);
        # a key absent from a record reads as None.
        index = pd.Index(lines, name="row")
        df = pd.DataFrame(
            {k: pd.Series([r.get(k) for r in records], dtype=object, index=index) for k in keys},
            index=index,
        )
    elif suffix == ".csv":
        text = _decode(path, raw, 1)
        if not text.strip():
            return pd.DataFrame(index=pd.Index([], name="row")), digest
        _check_csv_header(path, text)
        try:
            # Everything as text; empties stay "" and each loader decides what "" means.
            df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
        except (pd.errors.ParserError, ValueError) as exc:
            raise InputError(path, None, None, f"cannot parse CSV: {exc}") from None
        df.index = pd.Index(range(1, len(df) + 1), name="row")
    else:
        try:
            df = pq.read_table(io.BytesIO(raw)).to_pandas()
        except (pyarrow_mod.ArrowException, OSError, ValueError) as exc:
            raise InputError(path, None, None, f"cannot read Parquet: {exc}") from None
        df.index = pd.Index(range(1, len(df) + 1), name="row")
    return df, digest


def _check_csv_header(path: Path, text: str) -> None:
    """pandas silently renames a repeated header `a,a` to `a,a.1`: refuse it instead."""
    try:
        header = next(csv.reader(io.StringIO(text)), [])
    except csv.Error:
        return  # pandas reports the parse error with its own message
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise InputError(path, None, name, "duplicate column in the CSV header")
        seen.add(name)


def read_table(path: Path) -> pd.DataFrame:
    """Read a .jsonl/.csv/.parquet table; the index holds each record's 1-based row number.

    JSONL columns are object dtype (JSON types kept as parsed); CSV columns are all
    strings with empty cells as ""; Parquet columns keep their Arrow types.
    """
    return _read_with_hash(Path(path))[0]


def find_table(data_dir: Path, stem: str, required: bool) -> Path | None:
    """`data_dir/<stem>.{jsonl,csv,parquet}`; two forms at once is ambiguous, so an error."""
    data_dir = Path(data_dir)
    found = [data_dir / f"{stem}{s}" for s in TABLE_SUFFIXES if (data_dir / f"{stem}{s}").is_file()]
    if len(found) > 1:
        names = " and ".join(p.name for p in found)
        raise InputError(data_dir / stem, None, None, f"found both {names}: keep exactly one")
    if found:
        return found[0]
    if required:
        others = sorted(p.name for p in data_dir.glob(f"{stem}.*"))
        hint = f" (found {', '.join(others)}: not a supported format)" if others else ""
        raise InputError(
            data_dir / f"{stem}.jsonl",
            None,
            None,
            f"missing: expected {stem}.jsonl, {stem}.csv or {stem}.parquet in {data_dir}{hint}",
        )
    return None
