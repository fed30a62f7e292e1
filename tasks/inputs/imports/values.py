"""Reading one field of a source record strictly: the error names file, row and field."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path
from typing import Any

from ragspan.tasks.errors import InputError
from ragspan.tasks.inputs.load.problems import _describe, _is_missing


def text(path: Path, row: int | None, name: str, value: Any, *, optional: bool = False) -> str | None:
    """A string field; None when absent and optional."""
    if _is_missing(value):
        if optional:
            return None
        raise InputError(path, row, name, "missing")
    if not isinstance(value, str):
        raise InputError(path, row, name, f"expected a string, got {_describe(value)}")
    return value


def identifier(path: Path, row: int | None, name: str, value: Any) -> str:
    """An id: a string, or an integer written as one."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    out = text(path, row, name, value)
    assert out is not None
    return out


def text_list(path: Path, row: int | None, name: str, value: Any, *, optional: bool = False,
              csv: bool = False) -> list[str] | None:
    """A list of strings: a JSON/Parquet list, or (`csv`) a cell holding a JSON array or the
    Python list literal RAGAS's `to_csv` writes (`['a', 'b']`)."""
    items = _list(path, row, name, value, optional, csv)
    if items is None:
        return None
    for j, item in enumerate(items):
        if not isinstance(item, str):
            raise InputError(path, row, f"{name}[{j}]", f"expected a string, got {_describe(item)}")
    return items


def id_list(path: Path, row: int | None, name: str, value: Any, *, csv: bool = False) -> list[str | None] | None:
    """Document ids: strings or integers (OpenInference allows both), null allowed."""
    items = _list(path, row, name, value, True, csv)
    if items is None:
        return None
    out: list[str | None] = []
    for j, item in enumerate(items):
        if _is_missing(item):
            out.append(None)
        elif isinstance(item, str | int) and not isinstance(item, bool):
            out.append(str(item))
        else:
            raise InputError(path, row, f"{name}[{j}]", f"expected a string or an integer, got {_describe(item)}")
    return out


def score(path: Path, row: int | None, name: str, value: Any) -> float | None:
    if _is_missing(value):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise InputError(path, row, name, f"expected a number, got {_describe(value)}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(path, row, name, f"expected a number, got {_describe(value)}")
    if not math.isfinite(float(value)):
        raise InputError(path, row, name, f"expected a finite number, got {value!r}")
    return float(value)


def score_list(path: Path, row: int | None, name: str, value: Any, *,
               csv: bool = False) -> list[float | None] | None:
    items = _list(path, row, name, value, True, csv)
    if items is None:
        return None
    return [score(path, row, f"{name}[{j}]", item) for j, item in enumerate(items)]


def _list(path: Path, row: int | None, name: str, value: Any, optional: bool, csv: bool) -> list | None:
    if isinstance(value, str) and csv:
        value = _list_literal(path, row, name, value)
    elif hasattr(value, "tolist") and not isinstance(value, list):  # a Parquet list cell (numpy array)
        value = value.tolist()
    if value is None or (not isinstance(value, list) and _is_missing(value)):
        if optional:
            return None
        raise InputError(path, row, name, "missing")
    if not isinstance(value, list):
        raise InputError(path, row, name, f"expected a list, got {_describe(value)}")
    return value


def _list_literal(path: Path, row: int | None, name: str, cell: str) -> list | None:
    if not cell.strip():
        return None
    try:
        value = json.loads(cell)
    except ValueError:
        try:
            # RAGAS's to_csv writes str(list): a Python literal, read without evaluating code.
            value = ast.literal_eval(cell.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise InputError(path, row, name, "expected a list (a JSON array or ['…', '…']), got text "
                                              f"{cell[:40]!r}") from None
    if not isinstance(value, list):
        raise InputError(path, row, name, f"expected a list, got {_describe(value)}")
    return value
