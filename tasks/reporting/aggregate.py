"""aggregate: every evaluated run side by side — the report across runs (one DVC stage).

Reads `results/<run>/metrics.json` of each run in params.yaml `data.runs` and writes
`reports/`: `taxonomy.csv` (run × label: count, rate — the table `dvc plots` draws one
column per run), `summary.md` (one Markdown table), `metrics.json` (per run: claims,
unjudged, rates, failure shares — a DVC metric, results only) and `manifest.json` (per run:
the manifest's data/params/judge/code identity — not a metric).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from ragspan.tasks.core.taxonomy import FAILURE_LABELS, LABELS
from ragspan.tasks.errors import MissingRun
from ragspan.tasks.reporting.results_files import read_results
from ragspan.tasks.state import write_atomic_dir


def run_metrics(results: Path, runs: list[str]) -> dict[str, dict]:
    out = {}
    for run in runs:
        path = results / run / "metrics.json"
        if not path.is_file():
            raise MissingRun(f"{path}: no metrics for run {run!r}; evaluate it first (`dvc repro` or "
                             f"`ragspan evaluate --run {run}`)")
        out[run] = read_results(path.parent)
    return out


def aggregate_rows(metrics: dict[str, dict]) -> pd.DataFrame:
    return pd.DataFrame([
        {"run": run, "label": label, "count": m["labels"][label]["count"], "rate": m["labels"][label]["rate"]}
        for run, m in metrics.items() for label in LABELS
    ])


def aggregate_markdown(metrics: dict[str, dict]) -> str:
    head = "| run | claims | " + " | ".join(LABELS) + " |"
    rule = "|---|---:|" + "---:|" * len(LABELS)
    lines = ["# ragspan — all runs", "", head, rule]
    for run, m in metrics.items():
        cells = []
        for label in LABELS:
            v = m["labels"][label]
            cells.append(str(v["count"]) if v["rate"] is None else f"{v['count']} ({v['rate']:.1%})")
        lines.append(f"| {run} | {m['claims']} | " + " | ".join(cells) + " |")
    lines += ["", "Rates are over judged claims; `unjudged` is a count. Failure shares:", ""]
    lines += [f"- **{run}**: " + ", ".join(f"{label} {share:.0%}" for label, share in m["failure_share"].items()
                                            if share is not None) for run, m in metrics.items()]
    return "\n".join(lines) + "\n"


def aggregate_metrics(metrics: dict[str, dict]) -> dict:
    return {run: {"claims": m["claims"], "unjudged": m["unjudged"],
                  "rates": {label: m["labels"][label]["rate"] for label in LABELS if label != "unjudged"},
                  "failure_share": {label: m["failure_share"].get(label) for label in FAILURE_LABELS}}
            for run, m in metrics.items()}


# What identifies each run's results; the git revision is left out (it is stale as soon as
# the results are committed, so it would change on every re-run).
IDENTITY_KEYS = ("inputs_md5", "params_hash", "judge", "code_version")


def aggregate_manifest(metrics: dict[str, dict]) -> dict:
    return {run: {k: (m.get("manifest") or {}).get(k) for k in IDENTITY_KEYS} for run, m in metrics.items()}


def write_aggregate(results: Path, runs: list[str], out: Path) -> dict[str, dict]:
    metrics = run_metrics(results, runs)
    write_atomic_dir(out, {
        "taxonomy.csv": lambda p: aggregate_rows(metrics).to_csv(p, index=False),
        "summary.md": lambda p: p.write_text(aggregate_markdown(metrics), encoding="utf-8"),
        "metrics.json": lambda p: p.write_text(json.dumps(aggregate_metrics(metrics), indent=2) + "\n",
                                               encoding="utf-8"),
        "manifest.json": lambda p: p.write_text(json.dumps(aggregate_manifest(metrics), indent=2) + "\n",
                                                encoding="utf-8"),
    })
    return metrics
