"""The scale benchmarks' identity checks, small: on a workspace generated from the bundled
data/sample texts (no ../shared needed), the local judge's verdict rows judged with warm
caches equal those judged with cold ones (benchmarks/scale/verdicts.py --check), and the
incremental run after 5 % of the documents changed equals a cold run of the same data
(benchmarks/scale/scenarios.py --check; e2e: three CLI runs). Each check is also shown to fail
on a difference."""

from __future__ import annotations

import json
import shutil

import pytest

from benchmarks.scale import harness, scenarios, verdicts
from benchmarks.scale.generate import write_workspace

CHUNKS, ANSWERS = 300, 30


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A work dir holding the tiny workspace where scenarios.py looks for it (ws-CxA)."""
    work = tmp_path_factory.mktemp("scale")
    info = write_workspace(work / f"ws-{CHUNKS}x{ANSWERS}", CHUNKS, ANSWERS, source="sample")
    assert info["claims"] > ANSWERS and info["documents_changed"] >= 1
    return work


def test_verdict_rows_with_warm_caches_equal_cold_ones(work, tmp_path, capsys):
    ws, dump = work / f"ws-{CHUNKS}x{ANSWERS}", tmp_path / "rows.json"
    assert verdicts.main([str(ws), "--answers", str(ANSWERS), "--check", "--dump", str(dump)]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["cached_equals_fresh"] is True and report["pairs"] > 0
    assert verdicts.main([str(ws), "--answers", str(ANSWERS), "--compare", str(dump)]) == 0

    rows = json.loads(dump.read_text(encoding="utf-8"))
    rows[0]["row"][0] = "unsupported" if rows[0]["row"][0] == "supported" else "supported"
    dump.write_text(json.dumps(rows, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    assert verdicts.main([str(ws), "--answers", str(ANSWERS), "--compare", str(dump)]) == 1
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["equals_compared_dump"] is False


@pytest.mark.e2e  # three CLI runs: ~50 s on 2 shared cores
def test_run_after_documents_changed_equals_a_cold_run(work, tmp_path, monkeypatch, prefect_server):
    # the CLI runs against the session's Prefect server (no local server start per state dir)
    from prefect.settings import PREFECT_API_URL

    monkeypatch.setattr(harness, "API_URL", PREFECT_API_URL.value())
    out = tmp_path / "scenarios.json"
    rc = scenarios.main(["--size", f"{CHUNKS}x{ANSWERS}", "--work", str(work), "--check",
                         "--scenarios", "cold,5 % documents", "--json", str(out)])
    res = json.loads(out.read_text())
    assert res["docs_changed_differs_from_cold"] == [] and rc == 0
    docs = res["rows"]["5 % documents"]
    assert docs["verdicts_reused"] > 0 and docs["pairs_judged"] < res["docs_changed_cold"]["pairs_judged"]

    changed = tmp_path / "out-changed"
    shutil.copytree(work / "out-docs-cold", changed)
    metrics = json.loads((changed / "metrics.json").read_text())
    metrics["claims"] += 1
    (changed / "metrics.json").write_text(json.dumps(metrics))
    assert scenarios.same_results(work / "out-docs-changed", changed) == ["metrics.json"]
