"""`ragspan aggregate`: every run side by side, from results/<run>/metrics.json."""

from __future__ import annotations

import json

import pandas as pd
from ragspan.flows.cli import main
from ragspan.tasks.core.schemas import LABELS


def _metrics(counts: dict[str, int]) -> dict:
    judged = sum(v for k, v in counts.items() if k != "unjudged")
    labels = {k: {"count": counts.get(k, 0), "rate": None if k == "unjudged" else counts.get(k, 0) / judged}
              for k in LABELS}
    failures = sum(counts.get(k, 0) for k in ("rank_failure", "retrieval_miss", "synthesis_error", "hallucination"))
    return {"claims": sum(counts.values()), "unjudged": counts.get("unjudged", 0), "labels": labels,
            "failure_share": {k: counts.get(k, 0) / failures for k in
                              ("rank_failure", "retrieval_miss", "synthesis_error", "hallucination")},
            "manifest": {"params_hash": "p", "git_rev": None}}


def test_aggregate_puts_runs_side_by_side(tmp_path, capsys):
    runs = {"old": {"correct": 6, "rank_failure": 3, "hallucination": 1},
            "new": {"correct": 9, "hallucination": 1, "unjudged": 2}}
    for run, counts in runs.items():
        (tmp_path / "results" / run).mkdir(parents=True)
        (tmp_path / "results" / run / "metrics.json").write_text(json.dumps(_metrics(counts)))
    out = tmp_path / "reports"
    assert main(["aggregate", "old", "new", "--results", str(tmp_path / "results"), "--out", str(out)]) == 0
    table = pd.read_csv(out / "taxonomy.csv")
    assert len(table) == 2 * len(LABELS)
    new = table[table["run"] == "new"].set_index("label")
    assert new.loc["correct", "count"] == 9 and new.loc["correct", "rate"] == 0.9
    assert new.loc["unjudged", "count"] == 2 and pd.isna(new.loc["unjudged", "rate"])
    summary = (out / "summary.md").read_text()
    assert "| old | 10 | 6 (60.0%) | 3 (30.0%)" in summary and "| new | 12 | 9 (90.0%)" in summary
    assert json.loads((out / "metrics.json").read_text())["new"]["unjudged"] == 2
    assert "| new |" in capsys.readouterr().out


def test_a_run_without_results_is_a_clear_error(tmp_path, capsys):
    code = main(["aggregate", "ghost", "--results", str(tmp_path), "--out", str(tmp_path / "reports")])
    assert code == 2 and "no metrics for run 'ghost'" in capsys.readouterr().err
    assert not (tmp_path / "reports").exists()


def test_aggregate_reads_the_split_layout_and_keeps_identity_out_of_metrics(tmp_path):
    """Results written as metrics.json + manifest.json + run.json (results_files.py): the
    aggregate metric holds numbers only, the runs' identity goes to reports/manifest.json."""
    from ragspan.tasks.reporting.results_files import split_results

    view = {**_metrics({"correct": 3, "hallucination": 1}), "run": "r", "judge": {"calls": 7},
            "manifest": {"params_hash": "p", "code_version": "c", "git_rev": "abc", "git_dirty": True}}
    (tmp_path / "results" / "r").mkdir(parents=True)
    for name, body in split_results(view).items():
        (tmp_path / "results" / "r" / name).write_text(json.dumps(body))
    out = tmp_path / "reports"
    assert main(["aggregate", "r", "--results", str(tmp_path / "results"), "--out", str(out), "--quiet"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["r"]["rates"]["correct"] == 0.75 and "manifest" not in metrics["r"]
    identity = json.loads((out / "manifest.json").read_text())["r"]
    assert identity["params_hash"] == "p" and identity["code_version"] == "c" and "git_rev" not in identity
