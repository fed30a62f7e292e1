"""`ragspan judge check` against the scripted OpenAI-compatible server (real HTTP): which
modes work, the example calls, the estimate, the settings to use, and the exit status."""

from __future__ import annotations

import json
import socket

import pytest
from conftest import SAMPLE
from ragspan.flows.cli import main
from ragspan.tasks.judges.cache import JudgeCache, endpoint_label

from benchmarks._support.fake_openai_server import FakeOpenAIServer, Reply


@pytest.fixture(autouse=True)
def _no_params(tmp_path, monkeypatch, state_dir):
    monkeypatch.chdir(tmp_path)  # flags only, and the judge cache in a fresh state dir


def test_a_llama_cpp_like_server_is_usable_in_json_object_with_schema(capsys):
    with FakeOpenAIServer(accepts="llama-cpp") as server:
        code = main(["judge", "check", "--base-url", server.url, "--model", "fake-model", "--data", str(SAMPLE),
                     "--run", "baseline", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ok"] and report["reachable"] and report["model_listed"]
    assert report["modes"]["json_schema"]["ok"] is False and "Input should be" in report["modes"]["json_schema"]["detail"]
    assert report["best_mode"] == "json_object_schema"
    assert report["verdict"]["detail"] == "verdicts supported, unsupported"
    assert report["decomposition"]["ok"] and report["decomposition"]["completion_tokens"] > 0
    assert report["estimate"]["calls_at_most"] > 0 and report["estimate"]["prompt_tokens"] > 0
    assert "response_format: json_object_schema" in report["params"]
    assert f"--base-url {server.url}" in report["flags"]
    # remembered: the next evaluate starts in that mode
    with JudgeCache() as cache:
        assert cache.output_mode(endpoint_label(server.url), "fake-model")[0] == "json_object_schema"


def test_the_text_report_says_what_to_use(capsys):
    with FakeOpenAIServer() as server:
        code = main(["judge", "check", "--base-url", server.url, "--model", "fake-model"])
    out = capsys.readouterr().out
    assert code == 0 and "ok   output mode json_schema" in out and "usable as the judge" in out
    assert f"ragspan evaluate --judge openai --model fake-model --base-url {server.url}" in out


def test_an_unreachable_endpoint_exits_1(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    code = main(["judge", "check", "--base-url", dead, "--model", "m"])
    out = capsys.readouterr().out
    assert code == 1 and "FAIL reachable" in out and "not usable as the judge" in out


def test_an_unknown_model_exits_1_and_says_so(capsys):
    with FakeOpenAIServer(models=("gemma",)) as server:
        server.handler = lambda body: Reply(status=404, body={"error": {"message": "The model `llama` does not exist."}})
        code = main(["judge", "check", "--base-url", server.url, "--model", "llama", "--json"])
        sent = server.count
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and not report["ok"] and report["model_listed"] is False
    assert any("'llama' is not among the listed models (gemma)" in p for p in report["problems"])
    assert all(not m["ok"] for m in report["modes"].values()) and sent == len(report["modes"]) == 4
