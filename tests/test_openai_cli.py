"""`ragspan evaluate --judge openai --model M --base-url URL` works with nothing else
configured, and `--dry-run` counts calls without making any (real HTTP, fake server)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import SAMPLE
from fake_openai_server import FakeOpenAIServer
from ragspan.flows.cli import main
from ragspan.tasks.reporting.results_files import read_results


@pytest.fixture
def server():
    with FakeOpenAIServer() as s:
        yield s


def test_dry_run_makes_no_call_and_counts_them(server, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no params.yaml here: flags only
    code = main(["evaluate", "--data", str(SAMPLE), "--run", "baseline", "--judge", "openai",
                 "--model", "fake-model", "--base-url", server.url, "--dry-run", "--json"])
    estimate = json.loads(capsys.readouterr().out)
    assert code == 0 and server.count == 0
    assert estimate["judge"] == "openai" and estimate["claims_estimated"] >= estimate["answers"] > 0
    assert estimate["total_at_most"] == (estimate["decompose_calls"] + estimate["extract_calls"]
                                         + estimate["corpus_search_calls_at_most"])
    assert not (tmp_path / "results").exists()


@pytest.mark.usefixtures("prefect_server", "state_dir")
def test_flags_alone_configure_the_openai_judge(server, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a local endpoint needs no key
    out = tmp_path / "out"
    code = main(["evaluate", "--data", str(SAMPLE), "--run", "baseline", "--judge", "openai", "--model",
                 "fake-model", "--base-url", server.url, "--out", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert server.count > 0 and all(r["model"] == "fake-model" for r in server.requests)
    metrics = read_results(out)
    assert metrics["manifest"]["judge"]["kind"] == "openai" and metrics["manifest"]["judge"]["model"] == "fake-model"
    d = pd.read_parquet(out / "diagnoses.parquet")
    assert len(d) == metrics["claims"] and d["label"].notna().all()
