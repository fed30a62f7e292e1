"""UTF-8 byte offsets for consumers outside Python.

ragspan's offsets are Python `str` indices — Unicode code points (docs/offsets.md).
Rust, Go, C and most databases slice UTF-8 *bytes*; JavaScript and Java slice UTF-16
code units. This module converts code-point offsets into UTF-8 byte offsets so that

    doc.encode("utf-8")[byte_start:byte_end] == doc[char_start:char_end].encode("utf-8")

Pure functions over strings; no pandas. Null offsets (`None`, `pd.NA`, NaN — a
diagnosis without a span) stay null.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def utf8_offset(text: str, index: int) -> int:
    """UTF-8 byte offset of code-point `index` in `text` (0 <= index <= len(text))."""
    if not 0 <= index <= len(text):
        raise IndexError(f"code-point offset {index} outside [0, {len(text)}]")
    if text.isascii():
        return index
    return len(text[:index].encode("utf-8"))


def utf8_offsets(text: str, indices: Sequence[int]) -> list[int]:
    """`utf8_offset` for many indices of one text, in one pass over it (any order)."""
    n = len(text)
    for i in indices:
        if not 0 <= i <= n:
            raise IndexError(f"code-point offset {i} outside [0, {n}]")
    if text.isascii():
        return list(indices)
    out: dict[int, int] = {}
    at, nbytes = 0, 0
    for i in sorted(set(indices)):
        nbytes += len(text[at:i].encode("utf-8"))
        at = i
        out[i] = nbytes
    return [out[i] for i in indices]


def _missing(v: Any) -> bool:
    """None, NaN or pd.NA (pandas is not imported: this module stays dependency-free)."""
    if v is None:
        return True
    if isinstance(v, float):
        return math.isnan(v)
    return type(v).__name__ in ("NAType", "NaTType")


def utf8_spans(
    texts: Mapping[str, str],
    doc_ids: Sequence[Any],
    starts: Sequence[Any],
    ends: Sequence[Any],
) -> tuple[list[int | None], list[int | None]]:
    """(byte_starts, byte_ends) for rows of (doc_id, char_start, char_end).

    `texts` maps doc_id → document text. A row with a null doc_id or offset gets
    null byte offsets. Each document is scanned once, however many rows it has.
    """
    if not len(doc_ids) == len(starts) == len(ends):
        raise ValueError("doc_ids, starts and ends must have the same length")
    wanted: dict[str, list[int]] = {}
    rows: list[tuple[str, int, int] | None] = []
    for d, s, e in zip(doc_ids, starts, ends):
        if _missing(d) or _missing(s) or _missing(e):
            rows.append(None)
            continue
        s, e = int(s), int(e)
        rows.append((d, s, e))
        wanted.setdefault(d, []).extend((s, e))
    maps: dict[str, dict[int, int] | None] = {}
    for d, idx in wanted.items():
        text = texts[d]
        # In an ASCII document every character is one byte: offsets carry over as they are.
        maps[d] = None if text.isascii() else dict(zip(idx, utf8_offsets(text, idx)))
    byte_starts: list[int | None] = []
    byte_ends: list[int | None] = []
    for r in rows:
        if r is None:
            byte_starts.append(None)
            byte_ends.append(None)
        else:
            d, s, e = r
            m = maps[d]
            byte_starts.append(s if m is None else m[s])
            byte_ends.append(e if m is None else m[e])
    return byte_starts, byte_ends
