"""`ragspan evaluate --judge openai --model M --base-url URL` works with nothing else
configured, and `--dry-run` counts calls without making any (real HTTP, fake server)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from conftest import SAMPLE
from ragspan.flows.cli import main
from ragspan.tasks.reporting.results_files import read_results

from benchmarks._support.fake_openai_server import FakeOpenAIServer


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


def _judge_marking_changed_numbers(body: dict):
    """The default fake judge, except that a quote lacking a number of the claim but giving
    another makes the verdict `partial`, with that number marked and the quote's as what
    the passage says instead — an LLM judge's answer-side spans."""
    import re

    from benchmarks._support.fake_openai_server import (
        _tag,
        completion,
        schema_name,
        smart_reply,
        user_text,
    )

    reply = smart_reply(body)
    text = user_text(body)
    if (schema_name(body) or ("Extraction" if "<claim>" in text else "")) != "Extraction":
        return reply
    claim = _tag(text, "claim")
    numbers = re.findall(r"\d+", claim)
    value = json.loads(reply.body["choices"][0]["message"]["content"])
    for v in value["verdicts"]:
        said = re.findall(r"\d+", v["quote"])
        missing = [n for n in numbers if n not in said]
        if v["verdict"] == "supported" and missing and said:
            v.update(verdict="partial", unsupported_words=[{"words": missing[0], "passage_says": said[0]}])
    return completion(value)


@pytest.mark.usefixtures("prefect_server", "state_dir")
def test_the_llm_judges_marked_words_reach_the_answer_spans(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    with FakeOpenAIServer(handler=_judge_marking_changed_numbers) as server:
        code = main(["evaluate", "--data", str(SAMPLE), "--run", "baseline", "--judge", "openai", "--model",
                     "fake-model", "--base-url", server.url, "--out", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    spans = pd.read_parquet(out / "answer_spans.parquet")
    contradicted = spans[spans["kind"] == "contradicted"]
    assert len(contradicted), spans
    answers = {json.loads(line)["question_id"]: json.loads(line)["answer"]
               for line in (SAMPLE / "runs" / "baseline.jsonl").read_text(encoding="utf-8").splitlines() if line}
    corpus = {json.loads(line)["doc_id"]: json.loads(line)["text"]
              for line in (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line}
    for r in contradicted.to_dict("records"):
        assert answers[r["question_id"]][r["answer_start"]:r["answer_end"]] == r["text"] and r["text"].isdigit()
        assert corpus[r["doc_id"]][r["char_start"]:r["char_end"]] == r["evidence_text"] != r["text"]
    d = pd.read_parquet(out / "diagnoses.parquet").set_index("claim_id")
    assert (d.loc[contradicted["claim_id"], "label"] != "correct").all()
    assert read_results(out)["judge"]["invalid_marks"] == 0
