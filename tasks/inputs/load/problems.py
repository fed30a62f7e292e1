"""Validation: collecting problems in file order and raising the first as an InputError naming file, row and field."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pandera.pandas as pa
from ragspan.tasks.errors import InputError

# --------------------------------------------------------------------------- validation


def _is_missing(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _describe(v: Any) -> str:
    if v is None:
        return "null (or missing)"
    if v is pd.NA:
        return "missing value"
    if isinstance(v, float) and math.isnan(v):
        return "float NaN"
    r = repr(v)
    if len(r) > 40:
        r = r[:37] + "..."
    return f"{type(v).__name__} {r}"


class _Problems:
    """Collects the first problem of each independent check; reports the earliest row.

    Checks run column by column (fast, list-based), but the error must be the first
    problem in *file* order, so each check records only its first failure and the
    minimum (row position, check order) wins.
    """

    def __init__(self, file: Path, rows: list[int], key: tuple[str, list] | None = None):
        self.file = file
        self.rows = rows
        self.key = key  # (id column, its raw values): a problem in another field names the record's id
        self.found: list[tuple[int, int, str | None, str]] = []

    def add(self, pos: int, field: str | None, message: str) -> None:
        self.found.append((pos, len(self.found), field, message))

    def raise_first(self) -> None:
        if self.found:
            pos, _, field, message = min(self.found)
            if self.key is not None and field != self.key[0]:
                name, values = self.key
                value = values[pos] if pos < len(values) else None
                if isinstance(value, str) and value.strip():
                    message += f" ({name} {value!r})"
            raise InputError(self.file, self.rows[pos], field, message)


def _require_columns(path: Path, df: pd.DataFrame, columns: tuple[str, ...]) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        have = ", ".join(map(str, df.columns)) or "none"
        if Path(path).suffix.lower() == ".jsonl":
            # Records carry their own keys: the first record is where the key is missing.
            row = int(df.index[0]) if len(df) else None
            raise InputError(path, row, missing[0], f"missing required column (columns found: {have})")
        # CSV and Parquet name their columns once, in the header/schema: no data row is at fault.
        raise InputError(path, None, missing[0], f"missing required column in the header (columns found: {have})")


def _strings(
    values: list, field: str, probs: _Problems, *, blank_ok: bool = False, optional: bool = False
) -> list[str | None]:
    """Check a string column; with optional=True, missing/blank become None; with
    blank_ok=True, any string (even empty) is kept."""
    out: list[str | None] = []
    reported = False
    for pos, v in enumerate(values):
        if isinstance(v, str) and (blank_ok or v.strip()):
            out.append(v)
            continue
        if optional and (_is_missing(v) or (isinstance(v, str) and not v.strip())):
            out.append(None)
            continue
        out.append(None)
        if not reported:
            reported = True
            if isinstance(v, str):
                probs.add(pos, field, "empty string" if not v else "whitespace-only string")
            else:
                probs.add(pos, field, f"expected a string, got {_describe(v)}")
    return out


def _as_int(v: Any, lenient_str: bool) -> int | None:
    if isinstance(v, bool):
        return None  # True is an int in Python, not in the data
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)  # Parquet/JSON writers sometimes emit 12.0
    if lenient_str and isinstance(v, str) and re.fullmatch(r"\s*[+-]?\d+\s*", v):
        return int(v)
    return None


def _ints(values: list, field: str, probs: _Problems, lenient_str: bool) -> list[int | None]:
    out: list[int | None] = []
    reported = False
    for pos, v in enumerate(values):
        n = _as_int(v, lenient_str)
        out.append(n)
        if n is None and not reported:
            reported = True
            probs.add(pos, field, f"expected an integer, got {_describe(v)}")
    return out


def _unique(values: list, field: str, probs: _Problems, rows: list[int]) -> None:
    first: dict[Any, int] = {}
    for pos, v in enumerate(values):
        if v is None:
            continue
        if v in first:
            probs.add(pos, field, f"duplicate {field} {v!r} (first at row {rows[first[v]]})")
            return
        first[v] = pos


def _validate_schema(
    model: type[pa.DataFrameModel], df: pd.DataFrame, file: Path, rows: list[int]
) -> pd.DataFrame:
    """Backstop: the pandera model must agree with the checks above; report like them."""
    try:
        return model.validate(df)
    except pa.errors.SchemaError as exc:
        field = getattr(exc.schema, "name", None)
        row = None
        fc = exc.failure_cases
        if isinstance(fc, pd.DataFrame) and len(fc):
            if "column" in fc.columns:
                field = str(fc["column"].iloc[0])
            if "index" in fc.columns:
                try:
                    idx = int(fc["index"].iloc[0])
                except (TypeError, ValueError):
                    idx = -1
                if 0 <= idx < len(rows):
                    row = rows[idx]
        if field == model.__name__:
            field = None
        raise InputError(
            file, row, field, f"schema check failed: {exc.reason_code}: {exc}"
        ) from None


def _strip_index(df: pd.DataFrame) -> tuple[pd.DataFrame, list[int]]:
    rows = [int(r) for r in df.index]
    return df.reset_index(drop=True), rows
