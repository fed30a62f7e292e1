"""Prefect artifacts of evaluate runs (tasks/reporting/artifacts.py), read back from a real
`prefect server` on a free 127.0.0.1 port through its API.

The end-to-end test runs `ragspan evaluate` as a user does (a subprocess with
PREFECT_API_URL set) twice under one run name with different search depth, then reads
both artifact keys back: two versions each, the table equal to the runs' metrics.json,
the second Markdown carrying the change against the first. The watch flow's artifacts
(scheduled/triggered runs) are read back in tests/test_fresh_clone.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import SAMPLE
from ragspan.tasks.core.taxonomy import LABELS
from ragspan.tasks.reporting import artifacts as art
from servers import artifacts, clean_env, prefect_server

RAGSPAN = str(Path(sys.executable).parent / "ragspan")


@pytest.mark.parametrize("name", ["baseline", "My Run/v2", "démo", "..", "a" * 200, "event-demo-20261201T101502Z"])
def test_keys_fit_prefect_and_stay_apart(name):
    key = art.artifact_key(name)
    assert re.fullmatch(r"[a-z0-9-]+", key) and key.startswith("ragspan-")
    assert art.table_key(name) == key + "-rates"
    assert art.artifact_key(name) == key  # stable across runs
    assert len(key) <= 80


def test_keys_of_different_names_differ():
    names = ["baseline", "Baseline", "base line", "base-line", "base_line"]
    assert len({art.artifact_key(n) for n in names}) == len(names)
    assert art.artifact_key("baseline") == "ragspan-baseline"


def _metrics(correct: int, miss: int) -> dict:
    n = correct + miss
    labels = {lab: {"count": 0, "rate": 0.0 if lab != "unjudged" else None} for lab in LABELS}
    labels["correct"] = {"count": correct, "rate": correct / n}
    labels["retrieval_miss"] = {"count": miss, "rate": miss / n}
    return {"run": "r", "claims": n, "judged": n, "unjudged": 0, "labels": labels,
            "failure_share": {"retrieval_miss": 1.0}, "by_metadata": {},
            "rate_ci95": {"correct": {"low": 0.1, "high": 0.9}}, "judge": {"judge": "local", "model": "m"}}


def test_rows_and_markdown_carry_the_change():
    first = art.rate_rows(_metrics(3, 1), {})
    assert all(r["change"] is None for r in first)
    prev = art.previous_rates(json.dumps(first))
    assert prev["correct"] == 0.75
    rows = art.rate_rows(_metrics(1, 1), prev)
    by = {r["label"]: r for r in rows}
    assert by["correct"]["change"] == pytest.approx(-0.25) and by["retrieval_miss"]["change"] == pytest.approx(0.25)
    text = art.artifact_markdown(_metrics(1, 1), rows, "host:/x/report.html", {"created": "2026-12-01", "flow_run_id": "f"})
    assert "-25.0 pp" in text and "+25.0 pp" in text and "10.0% – 90.0%" in text
    assert "**retrieval_miss**" in text and "host:/x/report.html" in text
    assert "nothing to compare" in art.artifact_markdown(_metrics(1, 1), first, "h:/r", None)
    assert art.previous_rates(None) == {} and art.previous_rates('{"not": "rows"}') == {}


def test_evaluate_runs_publish_artifacts_a_server_returns(tmp_path):
    env = clean_env(tmp_path)
    env["RAGSPAN_HOME"] = str(tmp_path / "state")
    (tmp_path / "p").mkdir()
    deeper = tmp_path / "p" / "params.yaml"  # not ./params.yaml: the first run must not read it
    deeper.write_text(yaml.safe_dump({"search": {"top_k": 0}}))
    with prefect_server(tmp_path, env, tmp_path) as api:
        served = {**env, "PREFECT_API_URL": api}
        outs = []
        for i, params in enumerate((None, deeper)):
            out = tmp_path / f"out{i}"
            cmd = [RAGSPAN, "evaluate", "--data", str(SAMPLE), "--run", "baseline", "--out", str(out), "--quiet"]
            done = subprocess.run(cmd + (["--params", str(params)] if params else []), cwd=tmp_path, env=served,
                                  capture_output=True, text=True, timeout=300, check=False)
            assert done.returncode == 0, done.stderr[-3000:]
            outs.append(json.loads((out / "metrics.json").read_text()))
        tables = artifacts(api, "ragspan-baseline-rates")
        pages = artifacts(api, "ragspan-baseline")

    assert [a.type for a in tables] == ["table", "table"] and [a.type for a in pages] == ["markdown", "markdown"]
    assert all(a.flow_run_id for a in tables + pages)
    for table, metrics in zip(tables, outs):
        rows = {r["label"]: r for r in json.loads(table.data)}
        assert {k: (r["count"], r["rate"]) for k, r in rows.items()} == {
            k: (v["count"], v["rate"]) for k, v in metrics["labels"].items()}
        assert rows["correct"]["ci95_low"] == metrics["rate_ci95"]["correct"]["low"]
    first, second = outs
    moved = [lab for lab in LABELS if lab != "unjudged" and first["labels"][lab]["rate"] != second["labels"][lab]["rate"]]
    assert moved, "top_k=0 must change some rate (no corpus search: no retrieval_miss)"
    # with no corpus search the only retrieval_miss left is evidence cut by a chunk boundary
    assert first["labels"]["retrieval_miss"]["count"] > second["labels"]["retrieval_miss"]["count"] == (
        second["chunk_split"]["by_label"].get("retrieval_miss", 0))
    rows2 = {r["label"]: r for r in json.loads(tables[1].data)}
    for lab in moved:
        assert rows2[lab]["change"] == pytest.approx(second["labels"][lab]["rate"] - first["labels"][lab]["rate"], abs=1e-4)
        assert f"{rows2[lab]['change'] * 100:+.1f} pp" in pages[1].data
    assert "nothing to compare" in pages[0].data and "change vs previous" in pages[1].data
    assert str((tmp_path / "out1" / "report.html").resolve()) in pages[1].data
    assert "### What to fix first" in pages[1].data


@pytest.mark.usefixtures("prefect_server")
def test_a_scheduled_watch_run_publishes_under_its_index(tmp_path, state_dir):
    import shutil

    from prefect.artifacts import Artifact
    from ragspan.flows.watch import watch

    ws = tmp_path / "ws"
    shutil.copytree(SAMPLE, ws / "data")
    (ws / "params.yaml").write_text(yaml.safe_dump({"data": {"dir": "data", "runs": ["baseline"]},
                                                    "rag": {"index": "nightly docs"}}))
    record = watch(trigger="schedule", workspace=str(ws), params_path="params.yaml")
    key = art.artifact_key("nightly-docs")
    page, table = Artifact.get(key, _sync=True), Artifact.get(art.table_key("nightly-docs"), _sync=True)
    assert page is not None and table is not None, key
    assert page.type == "markdown" and str((ws / record["results"] / "report.html").resolve()) in page.data
    assert {r["label"]: r["count"] for r in json.loads(table.data)} == {k: v for k, v in record["counts"].items()}
