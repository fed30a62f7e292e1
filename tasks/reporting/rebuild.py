"""What an index rebuild changed: the claims whose label moved since the previous results of
the same run, when the corpus is what changed.

The previous results are the results directory the run replaces (`--out`, results/NAME:
what the CLI, the DVC stage and the watch flow in a DVC workspace write), or the one the
watch flow names (its previous record of the same index, results/history.jsonl). Their
manifest says what they were made from; this run's says the same of it. The corpus changed
when an input other than the run file and the questions has another md5. Claims are matched
as `ragspan compare` matches them (tasks/reporting/matching.py: question, claim text up to
whitespace, repeat index — not claim id, which a claim added before renumbers), so the two
tell the same transitions for the same two results; a transition is a pair of labels
(`rank_failure → correct`), a listed claim carries this run's claim id. When the run file,
judge, code or params changed as well, the transitions are not the rebuild's alone, and
`also_changed` names what else moved. docs/decisions.md #41.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from ragspan.tasks.reporting.matching import (
    MATCH_COLUMNS,
    direction,
    matched_claims,
    transition_matrix,
    transition_name,
    transitions,
)

MAX_LISTED = 50  # claims listed in summary.md and the artifact (run.json lists them all)


def _is_corpus(name: str) -> bool:
    return not name.startswith("runs/") and not name.startswith("questions.")


def previous_results(out_dir: Path) -> tuple[dict, pd.DataFrame] | None:
    """(manifest, diagnoses) of the results in `out_dir`, or None when there are none."""
    try:
        manifest = json.loads((out_dir / "manifest.json").read_text(encoding="utf-8"))
        diagnoses = pd.read_parquet(out_dir / "diagnoses.parquet", columns=MATCH_COLUMNS)
    except (OSError, ValueError, KeyError):
        return None
    return manifest, diagnoses


def what_else_changed(before: dict, now: dict) -> list[str]:
    """Besides the corpus: which of run file, questions, judge, code, params moved."""
    old, new = before.get("inputs_md5") or {}, now.get("inputs_md5") or {}
    out = []
    if {k: v for k, v in old.items() if k.startswith("runs/")} != {k: v for k, v in new.items() if k.startswith("runs/")}:
        out.append("run file")
    if {k: v for k, v in old.items() if k.startswith("questions.")} != \
            {k: v for k, v in new.items() if k.startswith("questions.")}:
        out.append("questions")
    now = json.loads(json.dumps(now, default=str))  # as on disk (tuples are lists there)
    for key, what in (("judge", "judge"), ("code_version", "code"), ("params_hash", "params")):
        if before.get(key) != now.get(key):
            out.append(what)
    return out


def rebuild_changes(previous: tuple[dict, pd.DataFrame] | None, manifest: dict, diagnoses: pd.DataFrame) -> dict | None:
    """The label transitions since `previous` when the corpus changed, else None."""
    if previous is None:
        return None
    before, old = previous
    corpus_old = {k: v for k, v in (before.get("inputs_md5") or {}).items() if _is_corpus(k)}
    corpus_new = {k: v for k, v in (manifest.get("inputs_md5") or {}).items() if _is_corpus(k)}
    if not corpus_old or corpus_old == corpus_new:
        return None
    matched, _, _ = matched_claims(old, diagnoses)
    moved = matched[np.array([direction(a, b) != "same" for a, b in zip(matched["label_a"], matched["label_b"])],
                             dtype=bool)]  # an array, not a list: an empty list would select columns
    return {
        "previous_data": (before.get("data") or {}).get("dvc_md5"),
        "also_changed": what_else_changed(before, manifest),
        "claims_compared": len(matched),
        "transitions": {transition_name(t["from"], t["to"]): t["count"]
                        for t in transitions(transition_matrix(matched))},
        "claims": [{"question_id": q, "claim_id": c, "claim": t, "before": a, "after": b}
                   for q, c, t, a, b in zip(moved["question_id"], moved["claim_id_b"], moved["claim"],
                                            moved["label_a"], moved["label_b"])],
    }


def rebuild_lines(change: dict | None, escape=str, listed: int = MAX_LISTED) -> list[str]:
    """Markdown lines for summary.md and the artifact (empty when nothing to say)."""
    if not change:
        return []
    moved = sum(change["transitions"].values())
    lines = ["### What the index rebuild changed", "",
             (f"The corpus changed since the previous results: {moved} of {change['claims_compared']} claims "
             "changed label.")]
    if change["also_changed"]:
        lines.append(f"Not the rebuild's alone: the {', '.join(change['also_changed'])} changed too.")
    if moved:
        lines += ["", "| transition | claims |", "|---|---:|"]
        lines += [f"| {escape(t)} | {n} |" for t, n in change["transitions"].items()]
        lines += [""] + [f"- `{str(c['claim_id']).replace('`', chr(39))}` {escape(c['before'])} → "
                         f"**{escape(c['after'])}**: "
                         f"{escape(c['claim'][:160])}" for c in change["claims"][:listed]]
        if moved > listed:
            lines.append(f"- … and {moved - listed} more (run.json `rebuild.claims`)")
    return [*lines, ""]


def rebuild_text(change: dict | None) -> str:
    """The terminal's line(s): transition counts, or nothing when the corpus did not change."""
    if not change:
        return ""
    moved = sum(change["transitions"].values())
    head = f"index rebuild: {moved} of {change['claims_compared']} claims changed label"
    if change["also_changed"]:
        head += f" (the {', '.join(change['also_changed'])} changed too)"
    parts = [f"{t} {n}" for t, n in change["transitions"].items()]
    return head + (": " + ", ".join(parts) if parts else "")
