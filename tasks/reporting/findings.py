"""What to fix first: failures ordered by how many claims they cost, and the metadata
group where each is most concentrated. Read by the HTML report and summary.md."""

from __future__ import annotations

from ragspan.tasks.core.taxonomy import FAILURE_LABELS


def fix_order(metrics: dict) -> list[str]:
    """Failure labels, most claims first (ties in taxonomy order)."""
    return sorted(FAILURE_LABELS, key=lambda lab: (-metrics["labels"][lab]["count"], FAILURE_LABELS.index(lab)))


def concentration(metrics: dict, label: str, min_count: int = 2) -> dict | None:
    """The metadata group where `label` is most over-represented: the largest
    (share of the label's claims in the group − share of all claims in the group)."""
    total_label = metrics["labels"][label]["count"]
    total = metrics["claims"]
    best = None
    for key, groups in (metrics.get("by_metadata") or {}).items():
        for value, counts in groups.items():
            k = counts.get(label, {}).get("count", 0)
            n = sum(c["count"] for c in counts.values())
            if k < min_count or not total_label or not total:
                continue
            lift = k / total_label - n / total
            if lift > 0 and (best is None or lift > best["lift"]):
                best = {"key": key, "value": value, "count": k, "of": total_label,
                        "share": k / total_label, "base": n / total, "lift": lift}
    return best
