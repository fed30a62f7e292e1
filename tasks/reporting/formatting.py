"""How numbers and missing values are shown, in every rendering (HTML, Markdown, text,
charts): one place, so the report, compare and the charts agree."""

from __future__ import annotations

import math

import pandas as pd

DASH = "—"


def is_missing(v: object) -> bool:
    """None, pandas' NA/NaT and float NaN (what a Parquet round trip gives for 'nothing')."""
    if v is None or v is pd.NA or v is pd.NaT:
        return True
    return isinstance(v, float) and math.isnan(v)


def pct(x: float | None, missing: str = DASH) -> str:
    """A rate as a percentage with one decimal: 0.1234 → '12.3%'."""
    return missing if is_missing(x) else f"{x:.1%}"


def pp(x: float | None, missing: str = DASH) -> str:
    """A difference of rates in percentage points, signed: 0.012 → '+1.2 pp'."""
    return missing if is_missing(x) else f"{x * 100:+.1f} pp"


def int_or_none(v: object) -> int | None:
    return None if is_missing(v) else int(v)


def cascade_note(judge: dict) -> str:
    """What a cascade judge spent and saved, in one line ("" for other judges)."""
    if judge.get("judge") != "cascade":
        return ""
    routed, kept = int(judge.get("routed") or 0), int(judge.get("not_routed") or 0)
    share = f" ({routed / (routed + kept):.0%})" if routed + kept else ""
    return (f"cascade: {routed} of {routed + kept} claim judgements sent to the LLM{share}, "
            f"{judge.get('calls', 0)} LLM calls made, {judge.get('calls_saved', 0)} saved")
