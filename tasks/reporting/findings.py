"""What to fix first: failures ordered by how many claims they cost, and for each the
metadata group where it is most concentrated. Read by the HTML report and summary.md.

A group's effect is the label's rate among the group's judged claims minus its rate among
all other judged claims, with a 95% interval (Newcombe's hybrid score interval for a
difference of two proportions, from Wilson intervals). Groups are chosen by effect size,
only when the interval excludes zero; groups holding (nearly) all claims — every document
a paper — compare with almost nothing and are skipped (NEARLY_ALL)."""

from __future__ import annotations

import math

from ragspan.tasks.core.taxonomy import FAILURE_LABELS, UNJUDGED
from ragspan.tasks.reporting.groups import NONE_GROUP

NEARLY_ALL = 0.9  # a group with this share of the judged claims or more is not a finding
Z95 = 1.959963984540054


def fix_order(metrics: dict) -> list[str]:
    """Failure labels, most claims first (ties in taxonomy order)."""
    return sorted(FAILURE_LABELS, key=lambda lab: (-metrics["labels"][lab]["count"], FAILURE_LABELS.index(lab)))


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def difference_interval(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float, float]:
    """(p1 − p2, low, high): Newcombe's hybrid score interval (his method 10)."""
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(k1, n1)
    l2, u2 = wilson(k2, n2)
    d = p1 - p2
    return d, d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def none_meaning(key: str) -> str:
    """What the `(none)` group of a metadata key holds (tasks/reporting/groups.py)."""
    field = key.split(".", 1)[-1]
    if key.startswith("doc."):
        return (f"{NONE_GROUP}: claims with no document to group by (no evidence and nothing retrieved "
                f"for the question) or whose document has no {field}")
    return f"{NONE_GROUP}: claims of questions without a {field}"


def group_effects(metrics: dict, label: str, min_count: int = 2) -> list[dict]:
    """Every metadata group with at least `min_count` claims of `label` and less than
    NEARLY_ALL of the judged claims, with its effect and interval; largest effect first."""
    judged_total = sum(v["count"] for lab, v in metrics["labels"].items() if lab != UNJUDGED)
    label_total = metrics["labels"][label]["count"]
    found = []
    for key, groups in (metrics.get("by_metadata") or {}).items():
        for value, counts in groups.items():
            k = counts.get(label, {}).get("count", 0)
            n = sum(c["count"] for lab, c in counts.items() if lab != UNJUDGED)
            rest = judged_total - n
            if k < min_count or n == 0 or rest <= 0 or n / judged_total >= NEARLY_ALL:
                continue
            effect, low, high = difference_interval(k, n, label_total - k, rest)
            found.append({"key": key, "value": value, "count": k, "of": label_total, "claims": n,
                          "share": k / label_total if label_total else 0.0, "base": n / judged_total,
                          "rate_in": k / n, "rate_out": (label_total - k) / rest,
                          "effect": effect, "low": low, "high": high,
                          "note": none_meaning(key) if value == NONE_GROUP else None})
    return sorted(found, key=lambda f: (-f["effect"], f["key"], f["value"]))


def concentration(metrics: dict, label: str, min_count: int = 2) -> dict | None:
    """The group where `label` is most over-represented beyond noise: the largest effect
    whose 95% interval lies above zero; None when no group stands out."""
    return next((f for f in group_effects(metrics, label, min_count) if f["low"] > 0), None)


def concentration_text(c: dict) -> str:
    """One line for the report: the group, its rate against the rest, the effect and interval."""
    text = (f"{c['key']} = {c['value']}: {c['rate_in']:.0%} of its {c['claims']} claims vs "
            f"{c['rate_out']:.0%} elsewhere ({c['effect'] * 100:+.0f} pp, 95% CI "
            f"{c['low'] * 100:+.0f} to {c['high'] * 100:+.0f} pp; {c['count']} of {c['of']})")
    return text + (f" — {c['note']}" if c.get("note") else "")
