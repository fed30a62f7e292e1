"""The scale benchmarks' identity checks, small: on a workspace generated from the bundled
data/sample texts (no ../shared needed), the local judge's verdict rows judged with warm
caches equal those judged with cold ones (benchmarks/scale/verdicts.py --check), and the
incremental run after 5 % of the documents changed equals a cold run of the same data
(benchmarks/scale/scenarios.py --check; e2e: three CLI runs), as growth.py --check finds it, and
kills during preparation and during the incremental update lose nothing (benchmarks/chaos.py
--ws). Each check is also shown to fail on a difference."""

from __future__ import annotations

import json
import shutil

import pytest

from benchmarks import chaos, chaos_big
from benchmarks.scale import growth, harness, scenarios, verdicts
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

    # --fixed: the bulk decision alone, as many pairs as judged above
    assert verdicts.main([str(ws), "--answers", str(ANSWERS), "--fixed"]) == 0
    fixed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert fixed["pairs"] == report["pairs"] and 0 < fixed["pairs_fixed"] < fixed["pairs"]

    # --open: the pairs left to the model, their rows' digest the same from one run to the next
    digests = []
    for _ in range(2):
        assert verdicts.main([str(ws), "--answers", str(ANSWERS), "--open"]) == 0
        opened = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert opened["open_pairs"] == fixed["pairs"] - fixed["pairs_fixed"] and opened["open_rows_cpu_s"] > 0
        digests.append(opened["rows_sha256"])
    assert digests[0] == digests[1] and len(digests[0]) == 64


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


@pytest.mark.e2e  # three CLI runs
def test_growth_rerun_equals_a_cold_run_and_costs_per_chunk(work, tmp_path, monkeypatch, prefect_server):
    from prefect.settings import PREFECT_API_URL

    monkeypatch.setattr(harness, "API_URL", PREFECT_API_URL.value())
    out = tmp_path / "growth.json"
    ws = work / f"ws-{CHUNKS}x{ANSWERS}"
    assert growth.main(["--ws", str(ws), "--work", str(tmp_path / "g"), "--check", "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["sizes"]
    assert row["differs_from_cold"] == [] and row["chunks"] == CHUNKS
    assert 0 < row["preparation_s"] < row["cold_wall_s"] and row["rerun_wall_s"] > 0
    assert row["per_chunk"]["peak_rss_bytes"] > 0 and row["per_chunk"]["input_bytes"] > 0
    assert not (tmp_path / "g" / ws.name / "home").exists()  # the state dirs are removed after


@pytest.mark.e2e  # nine CLI runs, three of them killed
def test_chaos_kills_in_preparation_and_update_lose_nothing(work, tmp_path, prefect_server):
    from prefect.settings import PREFECT_API_URL

    out = tmp_path / "chaos.json"
    rc = chaos.main(["--ws", str(work / f"ws-{CHUNKS}x{ANSWERS}"), "--kills", "3", "--work", str(tmp_path / "c"),
                     "--prefect-api", PREFECT_API_URL.value(), "--json", str(out)])
    res = json.loads(out.read_text())
    s = res["summary"]
    assert rc == 0 and s["passed"] == s["kills"] == 3 and s["tracebacks"] == 0
    assert s["per_kind"] == {"preparation": 1, "update": 1, "store": 1} and s["old_index_reused"] == 1
    assert res["trials"][2]["window_s"][1] > 0  # the store kill's window: before the flow's first step
    update = res["trials"][1]
    assert update["old_index_files_untouched"] and update["next_differs"] == []
    # the verdict fails on what it must catch: a difference, a traceback, an index rebuilt
    for bad in ({"next_differs": ["claims"]}, {"next_traceback": True}, {"old_index_reused": False}):
        assert not chaos_big.passed({**update, **bad})
