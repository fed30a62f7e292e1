"""The cascade judge: the local judge decides, only uncertain claims reach the LLM (a
scripted OpenAI-compatible server over real HTTP), and the outputs say who decided."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from conftest import SAMPLE
from ragspan.flows.cli import main
from ragspan.tasks.judges.base import JudgeFailure, Verdict
from ragspan.tasks.judges.cascade import needs_llm
from ragspan.tasks.reporting.results_files import read_results

from benchmarks._support.fake_openai_server import FakeOpenAIServer, user_text


def _v(verdict: str, support: float) -> Verdict:
    return Verdict(verdict=verdict, confidence=support if verdict == "supported" else 1 - support, support=support)


def test_routing_rules():
    t, band = 0.35, 0.1
    assert needs_llm([_v("unsupported", 0.05), _v("partial", 0.30)], "uncertain", band, t)  # 0.30 near 0.35
    assert not needs_llm([_v("unsupported", 0.05), _v("supported", 0.90)], "uncertain", band, t)
    assert not needs_llm([_v("unsupported", 0.05), _v("unsupported", 0.10)], "uncertain", band, t)
    assert needs_llm([_v("unsupported", 0.05), _v("unsupported", 0.10)], "not_supported", band, t)
    assert not needs_llm([_v("supported", 0.90)], "not_supported", band, t)
    assert not needs_llm([JudgeFailure(kind="no_content")], "uncertain", band, t)  # nothing to route


def _claims_sent(server) -> list[str]:
    return [re.search(r"<claim>\n(.*?)\n</claim>", user_text(b), re.DOTALL).group(1) for b in server.requests
            if "<claim>" in user_text(b)]


@pytest.mark.usefixtures("prefect_server", "state_dir")
def test_only_uncertain_claims_reach_the_llm_and_outputs_say_who_decided(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer(accepts="llama-cpp") as server:
        code = main(["evaluate", "--data", str(SAMPLE), "--run", "baseline", "--judge", "cascade", "--model",
                     "fake-model", "--base-url", server.url, "--out", "out", "--quiet"])
        sent = set(_claims_sent(server))
        requests = server.count
    assert code == 0, capsys.readouterr().err
    judge = read_results(tmp_path / "out")["judge"]
    d = pd.read_parquet(tmp_path / "out" / "diagnoses.parquet")
    assert set(d["decided_by"].dropna()) == {"local", "openai"}
    by_llm = set(d.loc[d["decided_by"] == "openai", "claim"])
    assert by_llm and by_llm <= sent  # every claim the LLM decided was sent to it
    assert 0 < judge["routed"] < judge["routed"] + judge["not_routed"]
    assert judge["calls"] == requests and judge["calls_saved"] >= judge["not_routed"] > 0
    # the local-only run: the routed claims are the ones it is unsure of
    code = main(["evaluate", "--data", str(SAMPLE), "--run", "baseline", "--out", "local", "--quiet"])
    local = pd.read_parquet(tmp_path / "local" / "diagnoses.parquet").set_index("claim_id")
    near = local.loc[d.loc[d["decided_by"] == "openai", "claim_id"], "support_probability"]
    assert (abs(near - 0.35) <= 0.1).all()
    assert "LLM calls made" in (tmp_path / "out" / "summary.md").read_text()


@pytest.mark.usefixtures("prefect_server", "state_dir")
def test_routing_every_claim_not_supported_sends_more(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(
        f"data:\n  dir: {SAMPLE}\n  runs: [baseline]\njudge:\n  cascade:\n    route: not_supported\n")
    with FakeOpenAIServer() as server:
        code = main(["evaluate", "--judge", "cascade", "--model", "fake-model", "--base-url", server.url,
                     "--out", "out", "--quiet"])
    assert code == 0, capsys.readouterr().err
    judge = read_results(tmp_path / "out")["judge"]
    d = pd.read_parquet(tmp_path / "out" / "diagnoses.parquet")
    # every claim the local judge did not find supported went to the LLM
    assert judge["routed"] > 0 and (d.loc[d["label"].isin(["hallucination", "synthesis_error"]), "decided_by"]
                                     == "openai").all()
