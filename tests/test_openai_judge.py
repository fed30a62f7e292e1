"""The openai judge over real HTTP against the scripted server in fake_openai_server.py:
structured outputs, offsets, quote validation with one re-ask, faults, budget,
concurrency, secrets — and one end-to-end evaluate flow run."""

from __future__ import annotations

import json
import logging
import shutil
import socket
import time
from email.utils import formatdate
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from ragspan.tasks.errors import ConfigError
from ragspan.tasks.judges import judge_spec, make_judge
from ragspan.tasks.judges.base import ClaimText, JudgeFailure, Verdict
from ragspan.tasks.judges.cache import JudgeCache
from ragspan.tasks.judges.openai_judge import OpenAIJudge, _retry_after, estimated_cost, openai_spec

from benchmarks._support.fake_openai_server import (
    FakeOpenAIServer,
    Reply,
    completion,
    garbage,
    passages_in,
    rate_limited,
    refusal,
    server_error,
    slow,
    truncated,
)

CANARY = "sk-canary-7f3a9c1e5b-DO-NOT-LEAK"


def _params(url: str, **kw) -> SimpleNamespace:
    base = {"model": "fake-model", "base_url": url, "backoff_base_s": 0.01, "backoff_max_s": 0.05,
            "max_retries": 2, "timeout_s": 5, "max_concurrency": 1}
    return SimpleNamespace(**(base | kw))


@pytest.fixture
def server():
    with FakeOpenAIServer() as s:
        yield s


@pytest.fixture
def make(server, tmp_path):
    """judge factory: options as keyword arguments, a fresh cache per test."""
    def build(**kw) -> OpenAIJudge:
        url = kw.pop("url", server.url)
        return OpenAIJudge(openai_spec(_params(url, **kw)), cache=JudgeCache(tmp_path / "cache.sqlite"))
    return build


def verdicts(*vs: dict) -> Reply:
    return completion({"verdicts": list(vs)})


def v(n: int, verdict: str = "supported", quote: str = "", confidence: float = 0.9) -> dict:
    return {"passage": n, "verdict": verdict, "quote": quote, "confidence": confidence, "reason": "r"}


# -- structured outputs ------------------------------------------------------------------------


def test_decomposition_returns_claims_with_exact_answer_offsets(server, make):
    answer = "José’s plan costs €5 per month.\r\nIt includes 東京 storage 🙂; backups are daily."
    server.push(completion({"claims": [
        {"claim": "José's plan costs €5 per month.", "answer_text": "José’s plan costs €5 per month."},
        {"claim": "The plan includes 東京 storage.", "answer_text": "it includes 東京  storage 🙂"},
        {"claim": "Backups are daily.", "answer_text": "backups are daily"},
        {"claim": "Support is free.", "answer_text": "support is free"},
        {"claim": "   ", "answer_text": ""},
    ]}))
    claims = make().decompose(answer)
    assert [c.text for c in claims] == ["José's plan costs €5 per month.", "The plan includes 東京 storage.",
                                        "Backups are daily.", "Support is free."]
    assert answer[claims[0].start:claims[0].end] == "José’s plan costs €5 per month."  # exact
    assert answer[claims[1].start:claims[1].end] == "It includes 東京 storage 🙂"  # normalised: case, spaces
    assert answer[claims[2].start:claims[2].end] == "backups are daily"
    assert claims[3] == ClaimText(text="Support is free.")  # not in the answer: no offsets, never invented
    body = server.requests[0]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "Decomposition"
    assert body["model"] == "fake-model" and body["temperature"] == 0 and "max_tokens" in body
    assert answer in body["messages"][1]["content"]


def test_extraction_judges_several_passages_in_one_call(server, make):
    passages = ["Plans. Northwind’s Business plan costs $80 per month, billed monthly.",
                "The Business plan doesn't cost $60 any more.",
                "Cats sleep a lot."]
    server.push(verdicts(  # out of order on purpose; a stray quote on `unsupported`
        v(3, "unsupported", "Cats sleep"),
        v(1, quote="Business plan costs $80 per month", confidence=0.95),
        v(2, "partial", quote="The Business plan doesn't cost $60", confidence=0.6),
    ))
    judge = make()
    out = judge.judge("The Business plan costs $80 per month.", passages)
    assert server.count == 1
    assert [x.verdict for x in out] == ["supported", "partial", "unsupported"]
    assert out[0].quote_start == passages[0].index("Business plan") and out[0].confidence == 0.95
    assert out[1].quote_start == 0  # matched after normalisation (curly vs straight apostrophe)
    assert out[2].quote is None and out[2].quote_start is None
    sent = server.requests[0]["messages"][1]["content"]
    assert "<claim>\nThe Business plan costs $80 per month.\n</claim>" in sent
    for i, p in enumerate(passages, 1):
        assert f'<passage id="{i}">\n{p}\n</passage>' in sent
    assert server.requests[0]["response_format"]["json_schema"]["strict"] is True
    assert judge.stats.calls == 1 and judge.stats.prompt_tokens == 100 and judge.stats.completion_tokens == 20


def test_passages_beyond_max_per_call_are_split_and_run_concurrently(server, make):
    server.delay = 0.2
    passages = [f"Passage {i}: the plan costs ${i} per month." for i in range(5)]
    judge = make(max_passages_per_call=2, max_concurrency=3)
    t0 = time.perf_counter()
    out = judge.judge("The plan costs $3 per month.", passages)
    elapsed = time.perf_counter() - t0
    assert server.count == 3 and len(out) == 5
    assert sorted(len(passages_in(b)) for b in server.requests) == [1, 2, 2]
    assert all(isinstance(x, Verdict) for x in out)
    assert elapsed < 0.5, f"chunks ran one after another ({elapsed:.2f}s)"


def test_judge_many_bounds_concurrency(server, make):
    server.delay = 0.2
    judge = make(max_concurrency=4)
    items = [(f"Claim {i} is true.", [f"Claim {i} is true, says passage {i}."]) for i in range(8)]
    t0 = time.perf_counter()
    out = judge.judge_many(items)
    elapsed = time.perf_counter() - t0
    assert server.count == 8 and server.max_in_flight == 4
    assert all(o[0].verdict == "supported" for o in out)
    assert 0.35 < elapsed < 1.2  # 8 calls × 0.2 s / 4 ≈ 0.4 s; one by one would be 1.6 s


# -- quote validation and the re-ask ------------------------------------------------------------


def test_invalid_quote_gets_one_reask_that_says_what_was_wrong(server, make):
    passages = ["Refunds are issued within 14 days.", "Support is open 24/7."]
    server.push(verdicts(v(1, quote="Refunds are issued within 30 days"), v(2, "unsupported")),
                verdicts(v(1, quote="Refunds are issued within 14 days"), v(2, "supported", "ignored")))
    judge = make()
    out = judge.judge("Refunds take 14 days.", passages)
    assert server.count == 2
    assert out[0].verdict == "supported" and out[0].quote_start == 0
    assert out[1].verdict == "unsupported"  # the first, valid verdict is kept
    reask = server.requests[1]["messages"]
    assert [m["role"] for m in reask] == ["system", "user", "assistant", "user"]
    assert "Refunds are issued within 30 days" in reask[2]["content"]
    assert "'Refunds are issued within 30 days' is not an exact substring of passage 1" in reask[3]["content"]
    assert "Passage 2" not in reask[3]["content"]
    assert judge.stats.invalid_quotes == 0


def test_a_quote_still_invalid_after_the_reask_is_dropped_as_invalid_quote(server, make):
    passages = ["Refunds are issued within 14 days.", "Support is open 24/7."]
    server.push(verdicts(v(1, quote="within 30 days"), v(2, quote="open 24/7")),
                verdicts(v(1, quote="within thirty days")))
    judge = make()
    out = judge.judge("Refunds take 14 days.", passages)
    assert server.count == 2
    assert isinstance(out[0], JudgeFailure) and out[0].kind == "invalid_quote"
    assert "within thirty days" in out[0].detail
    assert out[1].verdict == "supported" and out[1].quote == "open 24/7"
    assert judge.stats.invalid_quotes == 1 and judge.failures["invalid_quote"] == 1


def test_missing_or_empty_quotes_and_missing_verdicts_are_reasked(server, make):
    server.push(verdicts(v(1, quote="")), verdicts(v(1, "unsupported"), v(2, "partial", quote="B")))
    out = make().judge("claim", ["A", "B"])
    assert server.count == 2
    msg = server.requests[1]["messages"][3]["content"]
    assert "Passage 1: verdict `supported` needs a quote" in msg and "Passage 2: no verdict" in msg
    assert out[0].verdict == "unsupported" and out[1].verdict == "partial"


# -- faults ------------------------------------------------------------------------------------


def test_429_honours_retry_after_then_succeeds(server, make):
    server.push(rate_limited(1))
    judge = make()
    t0 = time.perf_counter()
    [out] = judge.judge("The plan costs $5.", ["The plan costs $5."])
    assert time.perf_counter() - t0 >= 0.95
    assert out.verdict == "supported"
    assert server.count == 2 and judge.stats.calls == 2 and judge.retries == 1


def test_5xx_backs_off_exponentially_with_jitter_then_gives_up(server, make):
    server.push(*[server_error(s) for s in (500, 502, 503)])
    judge = make(backoff_base_s=0.1, backoff_max_s=1.0)
    t0 = time.perf_counter()
    [out] = judge.judge("c", ["c"])
    elapsed = time.perf_counter() - t0
    assert isinstance(out, JudgeFailure) and out.kind == "http_error" and "3 attempts" in out.detail
    assert server.count == 3  # max_retries=2: three attempts, then stop
    assert 0.5 * (0.1 + 0.2) <= elapsed < 1.0  # two waits: 0.1·2⁰ and 0.1·2¹, each × U(0.5, 1)
    server.push(server_error(500))
    assert make().judge("The plan costs $5.", ["The plan costs $5."])[0].verdict == "supported"


def test_a_slow_reply_past_the_timeout_is_retried(server, make):
    server.push(slow(2.0))
    t0 = time.perf_counter()
    [out] = make(timeout_s=0.4).judge("The plan costs $5.", ["The plan costs $5."])
    assert out.verdict == "supported" and server.count == 2
    assert time.perf_counter() - t0 < 1.8


def test_client_errors_are_not_retried_and_connection_errors_are(server, make):
    server.push(Reply(status=400, body={"error": {"message": "model not found"}}))
    [out] = make().judge("c", ["c"])
    assert out.kind == "rejected" and "HTTP 400: model not found" in out.detail and server.count == 1
    assert "--model" in out.detail  # the hint names what to change
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    [out] = make(url=dead).judge("c", ["c"])
    assert out.kind == "http_error" and "connection error" in out.detail


def test_a_retry_after_beyond_the_limit_ends_the_retries(server, make):
    server.push(rate_limited(3600))
    [out] = make().judge("c", ["c"])
    assert out.kind == "http_error" and "3600" in out.detail and server.count == 1


def test_retry_after_header_forms():
    assert _retry_after({"retry-after-ms": "250"}) == 0.25
    assert _retry_after({"retry-after": "2"}) == 2.0
    assert 8 <= _retry_after({"retry-after": formatdate(time.time() + 10, usegmt=True)}) <= 10
    assert _retry_after({"retry-after": "soon"}) is None and _retry_after({}) is None


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (refusal(), "refusal"),
        (completion(None, finish_reason="content_filter"), "refusal"),
        (truncated(), "truncated"),
        (garbage(), "unparseable"),
        (completion({"verdicts": [{"passage": 1, "verdict": "maybe"}]}), "unparseable"),
        (completion({"verdicts": [v(1, confidence=1.7)]}), "unparseable"),
        (completion(None), "unparseable"),
        (Reply(body=b"<html>oops</html>"), "unparseable"),
    ],
)
def test_bad_replies_are_typed_failures_and_never_cached(server, make, reply, kind):
    server.push(reply)
    judge = make()
    out = judge.judge("The plan costs $5.", ["The plan costs $5.", "Other."])
    assert [o.kind for o in out] == [kind, kind]
    assert judge.failures[kind] == 1 and server.count == 1
    assert len(judge.cache) == 0
    assert make().judge("The plan costs $5.", ["The plan costs $5.", "Other."])[0].verdict == "supported"
    assert server.count == 2


def test_decomposition_failure_is_a_judge_failure(server, make):
    server.push(truncated())
    out = make().decompose("Some answer.")
    assert isinstance(out, JudgeFailure) and out.kind == "truncated"
    assert make().decompose("   ") == [] and server.count == 1


# -- budget ------------------------------------------------------------------------------------


def test_call_budget_stops_judging_cleanly(server, make):
    items = [(f"Claim {i} holds.", [f"Claim {i} holds here."]) for i in range(5)]
    out = make(max_calls=3).judge_many(items)
    assert server.count == 3
    assert [type(o[0]).__name__ for o in out] == ["Verdict"] * 3 + ["JudgeFailure"] * 2
    assert out[4][0].kind == "budget_exhausted" and "3" in out[4][0].detail
    # Cache hits are free: a re-run with the same budget finishes the job.
    again = make(max_calls=3)
    assert all(isinstance(o[0], Verdict) for o in again.judge_many(items))
    assert again.stats.cache_hits == 3 and again.stats.calls == 2


def test_token_budget_stops_judging_cleanly(server, make):
    items = [(f"Claim {i} holds.", [f"Claim {i} holds here."]) for i in range(5)]
    judge = make(max_tokens=250)  # 120 tokens a call: the third call starts at 240
    out = judge.judge_many(items)
    assert server.count == 3 and judge.stats.prompt_tokens + judge.stats.completion_tokens == 360
    assert [o[0].kind for o in out[3:]] == ["budget_exhausted"] * 2


def test_the_budget_is_shared_by_every_judge_of_one_flow_run(prefect_server, server, make):
    from prefect import flow

    @flow
    def two_steps() -> list:
        first, second = make(max_calls=2), make(max_calls=2)  # as decompose and extract would
        return [first.judge("Claim a holds.", ["Claim a holds."])[0],
                second.judge("Claim b holds.", ["Claim b holds."])[0],
                second.judge("Claim c holds.", ["Claim c holds."])[0]]

    out = two_steps()
    assert [type(o).__name__ for o in out] == ["Verdict", "Verdict", "JudgeFailure"]
    assert out[2].kind == "budget_exhausted" and server.count == 2
    assert isinstance(two_steps()[2], Verdict)  # a new run has a new budget (and a, b are cached)


def test_estimated_cost_from_the_price_table(make, server):
    judge = make()
    judge.judge("The plan costs $5.", ["The plan costs $5."])
    prices = SimpleNamespace(price_per_1k_prompt=0.5, price_per_1k_completion=2.0)
    assert estimated_cost(judge.stats, prices) == pytest.approx(0.1 * 0.5 + 0.02 * 2.0)
    assert estimated_cost(judge.stats, SimpleNamespace()) is None


# -- configuration and secrets -------------------------------------------------------------------


def test_spec_names_model_endpoint_prompts_and_options(server, monkeypatch):
    spec = openai_spec(_params(server.url + "/", temperature=0.2))
    assert spec.kind == "openai" and spec.model == "fake-model" and spec.base_url == server.url
    assert spec.prompt_version.startswith("decompose@") and "+extract@" in spec.prompt_version
    assert dict(spec.options)["temperature"] == "0.2"
    assert judge_spec(SimpleNamespace(kind="openai", **vars(_params(server.url)))) == openai_spec(_params(server.url))
    assert isinstance(make_judge(spec), OpenAIJudge)


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"model": ""}, "judge.model is empty"),
        ({"base_url": "https://user:pw@api.example.com/v1"}, "credentials"),
        ({"base_url": "https://api.example.com/v1?api-key=x"}, "credentials"),
        ({"base_url": "ftp://api.example.com"}, "http"),
        ({"base_url": "https://api.example.com/v1"}, "OPENAI_API_KEY"),
        ({"base_url": "https://api.example.com/v1", "api_key_env": "MY_KEY"}, "MY_KEY"),
    ],
)
def test_spec_errors_are_config_errors(params, error, monkeypatch):
    for name in ("OPENAI_API_KEY", "RAGSPAN_JUDGE_API_KEY", "MY_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match=error):
        openai_spec(SimpleNamespace(**(vars(_params("http://127.0.0.1:1/v1")) | params)))


def test_the_api_key_never_leaks(server, make, tmp_path, monkeypatch, caplog, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    for name in (None, "openai", "httpx2", "httpcore2", "ragspan"):
        caplog.set_level(logging.DEBUG, logger=name)  # restored after the test

    def echo_key(body: dict) -> Reply:  # a server that echoes the key back, as some do
        return Reply(status=401, body={"error": {"message": f"Incorrect API key provided: {CANARY}"}})

    server.push(server_error(), Reply(status=401, body={"error": {"message": f"Incorrect API key provided: {CANARY}"}}))
    judge = make()
    [failed] = judge.judge("The plan costs $5.", ["The plan costs $5."])
    assert failed.kind == "rejected" and "Incorrect API key provided: ***" in failed.detail
    assert "OPENAI_API_KEY" in failed.detail  # the hint: which variable holds the key
    ok = judge.judge("The plan costs $5.", ["The plan costs $5."])
    assert ok[0].verdict == "supported"
    assert {k.lower(): v for k, v in server.headers[-1].items()}["authorization"] == f"Bearer {CANARY}"  # it is sent, and only sent
    server.handler = echo_key
    assert judge.decompose("An answer.").kind == "rejected"
    out, err = capsys.readouterr()
    leaks = [caplog.text, out, err, repr(judge.spec), json.dumps(judge.spec.as_dict()), repr(judge.stats),
             repr(dict(judge.failures)), failed.model_dump_json()]
    assert not [x for x in leaks if CANARY in x]
    for f in tmp_path.glob("cache.sqlite*"):
        assert CANARY.encode() not in f.read_bytes(), f.name


# -- end to end: the evaluate flow against the scripted server --------------------------------


def _tiny_data(root: Path) -> Path:
    docs = {
        "storage.md": "Object Storage costs $5 per month. It includes 250 GB of storage.",
        "compute.md": "Compute instances are billed per second. The minimum charge is 60 seconds.",
        "backups.md": "Backups run every night at 02:00 UTC and are kept for 7 days.",
    }
    root.mkdir()
    (root / "runs").mkdir()
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"doc_id": doc_id, "text": text, "doc_type": "manual"}) + "\n" for doc_id, text in docs.items())
    pd.DataFrame({"question_id": ["q1", "q2"], "question": ["What does storage cost?", "How is compute billed?"]}
                 ).to_csv(root / "questions.csv", index=False)
    full = {k: {"doc_id": k, "char_start": 0, "char_end": len(t)} for k, t in docs.items()}
    runs = [
        {"question_id": "q1", "answer": "Object Storage costs $5 per month. It includes 250 GB of storage.",
         "retrieved": [full["storage.md"], full["compute.md"]], "context_k": 1},
        {"question_id": "q2", "answer": "Compute instances are billed per second. Backups run every night at "
                                        "02:00 UTC. The moon is made of green cheese.",
         "retrieved": [full["compute.md"]], "context_k": 1},
    ]
    (root / "runs" / "r1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs), encoding="utf-8")
    return root


def test_evaluate_flow_end_to_end_then_rerun_from_the_judge_cache(prefect_server, state_dir, tmp_path, monkeypatch):
    from ragspan.flows.evaluate import evaluate

    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    data = _tiny_data(tmp_path / "data")
    with FakeOpenAIServer() as server:
        params = tmp_path / "params.yaml"
        params.write_text(f"judge:\n  kind: openai\n  model: fake-model\n  base_url: {server.url}\n")
        server.push(server_error(503))  # one transient fault on the first call: retried
        metrics = evaluate(data_dir=str(data), run="r1", out_dir=str(tmp_path / "out1"), params_path=str(params),
                           judge="openai")
        first = server.count
        diagnoses = pd.read_parquet(tmp_path / "out1" / "diagnoses.parquet")
        labels = {"correct", "rank_failure", "retrieval_miss", "synthesis_error", "hallucination", "unjudged"}
        assert len(diagnoses) == metrics["claims"] == 5
        assert set(diagnoses["label"]) <= labels and diagnoses["label"].notna().all()
        by_claim = dict(zip(diagnoses["claim"], diagnoses["label"], strict=True))
        assert by_claim["Object Storage costs $5 per month."] == "correct"
        assert by_claim["Backups run every night at 02:00 UTC."] == "retrieval_miss"
        assert by_claim["The moon is made of green cheese."] == "hallucination"
        assert metrics["judge"]["calls"] == first and first >= 4
        assert metrics["judge"]["prompt_version"].startswith("decompose@")

        # A second run that Prefect cannot reuse (another run name) is served by the judge cache.
        shutil.copy(data / "runs" / "r1.jsonl", data / "runs" / "r2.jsonl")
        again = evaluate(data_dir=str(data), run="r2", out_dir=str(tmp_path / "out2"), params_path=str(params),
                         judge="openai")
        assert server.count == first, "the re-run made HTTP requests"
        assert again["judge"]["calls"] == 0 and again["judge"]["cache_hits"] >= first - 1
        assert {k: v["count"] for k, v in again["labels"].items()} == {k: v["count"] for k, v in metrics["labels"].items()}
    for root in (tmp_path / "out1", tmp_path / "out2", state_dir):
        for f in root.rglob("*"):
            if f.is_file():
                assert CANARY.encode() not in f.read_bytes(), f


def test_json_mode_with_the_schema_attached(server, make):
    """response_format json_object_schema (llama-cpp-python's server): JSON mode with the
    schema attached, the reply validated by pydantic, the same typed outcomes."""
    passage = "The Pro plan costs $49 per month."
    judge = make(response_format="json_object_schema")
    out = judge.judge("The Pro plan costs $49 per month.", [passage])
    fmt = server.requests[0]["response_format"]
    assert fmt["type"] == "json_object" and fmt["schema"]["title"] == "Extraction"
    assert out[0].verdict == "supported" and passage[out[0].quote_start:].startswith(out[0].quote)
    server.push(completion("not json at all"), truncated())
    bad = make(response_format="json_object_schema", cache=False).judge_many(
        [("A claim here.", ["x"]), ("Another one.", ["y"])])
    assert sorted(f[0].kind for f in bad) == ["truncated", "unparseable"]
    claims = make(response_format="json_object_schema").decompose("Refunds take 30 days. The Pro plan costs $49.")
    assert [c.text for c in claims] == ["Refunds take 30 days.", "The Pro plan costs $49."]


# -- structured-output negotiation: the modes real servers take ----------------------------


CLAIMS = [(f"The Pro plan costs ${n} per month.", [f"The Pro plan costs ${n} per month."]) for n in range(10, 16)]


def _formats(server) -> list[str]:
    """Per request: the response_format sent (json_object+schema, json_object, or none)."""
    out = []
    for body in server.requests:
        fmt = body.get("response_format")
        out.append("prompt" if fmt is None else fmt["type"] + ("+schema" if "schema" in fmt else ""))
    return out


@pytest.mark.parametrize(("flavour", "lands_on", "sent"), [
    ("llama-cpp", "json_object_schema", ["json_schema", "json_object+schema"]),
    ("400", "json_object", ["json_schema", "json_object+schema", "json_object"]),
    ("prompt-only", "prompt", ["json_schema", "json_object+schema", "json_object", "prompt"]),
])
def test_negotiation_lands_on_the_mode_the_server_takes_and_remembers_it(flavour, lands_on, sent, tmp_path, caplog):
    from ragspan.tasks.judges.output_modes import forget_modes

    cache_file = tmp_path / "cache.sqlite"
    with FakeOpenAIServer(accepts=flavour) as server:
        judge = OpenAIJudge(openai_spec(_params(server.url)), cache=JudgeCache(cache_file))
        with caplog.at_level(logging.WARNING, logger="ragspan.judge"):
            out = judge.judge_many(CLAIMS)
        assert all(v[0].verdict == "supported" for v in out)
        # each rejected mode costs one request, once; no retry is spent on a rejection
        assert _formats(server) == sent + [sent[-1]] * (len(CLAIMS) - 1)
        assert judge.retries == 0 and judge.output_mode == lands_on
        said = [r.getMessage() for r in caplog.records if "structured output via" in r.getMessage()]
        assert len(said) == 1 and lands_on in said[0] and "rejected" in said[0]
        if lands_on in ("json_object", "prompt"):  # not told the schema: the prompt carries it
            system = server.requests[-1]["messages"][0]["content"]
            assert '"verdicts"' in system and "JSON schema" in system

        # a later run (another process: nothing in memory) starts on the remembered mode
        forget_modes()
        server.reset()
        again = OpenAIJudge(openai_spec(_params(server.url)), cache=JudgeCache(cache_file))
        again.judge("The Basic plan costs $5 per month.", ["The Basic plan costs $5 per month."])
        assert _formats(server) == [sent[-1]]


def test_a_forced_mode_the_server_rejects_fails_fast_with_a_hint_and_stops_early(tmp_path):
    """llama-cpp-python answers json_schema with a 500 validation body: not retried, a
    hint names the setting, and after max_rejections identical rejections no more
    requests are sent."""
    with FakeOpenAIServer(accepts="llama-cpp") as server:
        judge = OpenAIJudge(openai_spec(_params(server.url, response_format="json_schema", max_retries=4)),
                            cache=JudgeCache(tmp_path / "c.sqlite"))
        out = [v[0] for v in judge.judge_many(CLAIMS)]
        assert all(isinstance(f, JudgeFailure) and f.kind == "rejected" for f in out)
        assert server.count == 3 and judge.retries == 0  # max_rejections, default 3
        assert "judge.response_format: auto" in out[0].detail and "Input should be" in out[0].detail
        assert out[-1].detail.startswith("not sent: the last 3 calls were rejected")


def test_a_non_format_rejection_stops_the_run_early_and_a_success_resets_the_count(server, make):
    server.handler = lambda body: Reply(status=404, body={"error": {"message": "model 'gpt-x' not found"}})
    judge = make(max_rejections=2)
    out = [v[0] for v in judge.judge_many(CLAIMS)]
    assert server.count == 2 and all(f.kind == "rejected" for f in out)
    assert "ragspan judge check" in out[0].detail
    # rejections that are not in a row do not stop anything
    from benchmarks._support.fake_openai_server import smart_reply
    server.reset()
    replies = iter([True, False, True, False, True, False])
    server.handler = lambda body: (Reply(status=400, body={"error": {"message": "bad"}}) if next(replies)
                                   else smart_reply(body))
    out = [v[0] for v in make(max_rejections=2, cache=False).judge_many(CLAIMS)]
    assert server.count == len(CLAIMS) and [isinstance(f, JudgeFailure) for f in out] == [True, False] * 3


def test_the_question_reaches_both_prompts_and_the_cache_key(make, server):
    """A claim is judged as an answer to its question: the question is in the messages
    the server receives (decomposition and extraction), so it is also in the cache key."""
    judge = make()
    judge.decompose("Delhi.", "What is the capital of India?")
    judge.judge("Delhi.", ["New Delhi is the capital of India."], "What is the capital of India?")
    users = [m["content"] for body in server.requests for m in body["messages"] if m["role"] == "user"]
    assert len(users) == 2
    assert all("<question>\nWhat is the capital of India?\n</question>" in u for u in users)
    calls = server.count
    judge.judge("Delhi.", ["New Delhi is the capital of India."], "What is the capital of Bhutan?")
    assert server.count == calls + 1  # another question: not served from the cache


# -- unsupported words: validated against the claim like quotes against passages -----------------


def test_unsupported_words_become_claim_marks_with_the_contradicting_passage_words(server, make):
    passages = ["Refunds are issued within 14 days of the request."]
    claim = "Refunds are issued within 30 days by cheque."
    server.push(verdicts({**v(1, "partial", quote="Refunds are issued within 14 days"),
                          "unsupported_words": [{"words": "30", "passage_says": "14"},
                                                {"words": "by cheque", "passage_says": ""}]}))
    judge = make()
    out = judge.judge(claim, passages)[0]
    assert server.count == 1 and out.verdict == "partial"
    got = [(claim[m.start:m.end], m.kind, None if m.evidence_start is None else
            passages[0][m.evidence_start:m.evidence_end]) for m in out.marks]
    assert got == [("30", "contradicted", "14"), ("by cheque", "unsupported", None)]
    assert judge.stats.invalid_marks == 0
    # cached with the verdict: the same call again asks nothing and gives the same marks
    again = make().judge(claim, passages)[0]
    assert server.count == 1 and again.marks == out.marks


def test_words_not_in_the_claim_are_reasked_once_then_dropped_and_counted(server, make):
    passages = ["Refunds are issued within 14 days."]
    claim = "Refunds are issued within 30 days."
    bad = {**v(1, "partial", quote="Refunds are issued within 14 days"),
           "unsupported_words": [{"words": "thirty", "passage_says": "14"}, {"words": "30", "passage_says": "fourteen"}]}
    server.push(verdicts(bad), verdicts(bad))
    judge = make()
    out = judge.judge(claim, passages)[0]
    assert server.count == 2
    assert "'thirty' are not an exact substring of the claim" in server.requests[1]["messages"][-1]["content"]
    # the verdict stands; the word in the claim is kept (as unsupported: the passage does
    # not hold "fourteen"), the other dropped and counted
    assert out.verdict == "partial" and [(claim[m.start:m.end], m.kind) for m in out.marks] == [("30", "unsupported")]
    assert judge.stats.invalid_marks == 1 and judge.stats.invalid_quotes == 0


def test_the_small_model_grammar_lets_only_partial_verdicts_mark_words_of_the_claim():
    from ragspan.tasks.judges.openai_messages import Extraction, extract_choices
    from ragspan.tasks.judges.output_modes import grammar_schema

    g = grammar_schema(Extraction.model_json_schema(),
                       **extract_choices(["Refunds are issued within 14 days."], "Refunds take 30 days."))
    variants = g["properties"]["verdicts"]["prefixItems"][0]["anyOf"]
    by_verdict = {tuple(x["properties"]["verdict"]["enum"]): x["properties"]["unsupported_words"] for x in variants}
    assert by_verdict[("unsupported",)]["maxItems"] == 0
    marks = by_verdict[("supported", "partial")]
    assert marks["maxItems"] > 0
    assert marks["items"]["properties"]["words"]["enum"] == ["Refunds", "take", "30", "days."]
