"""The judge cache: keys, concurrency (threads + processes), SIGKILL durability, CLI."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from ragspan.flows.cli import cache as cache_cmd
from ragspan.tasks.judges.cache import JudgeCache, cache_key, endpoint_label
from ragspan.tasks.judges.openai_judge import OpenAIJudge, openai_spec

from benchmarks._support.fake_openai_server import FakeOpenAIServer, refusal, server_error

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable


def _params(url: str, **kw) -> SimpleNamespace:
    base = {"model": "fake-model", "base_url": url, "backoff_base_s": 0.01, "backoff_max_s": 0.02,
            "max_retries": 1, "timeout_s": 5}
    return SimpleNamespace(**(base | kw))


@pytest.fixture
def server():
    with FakeOpenAIServer() as s:
        yield s


def _judge(server, cache_path, **kw) -> OpenAIJudge:
    return OpenAIJudge(openai_spec(_params(server.url, **kw)), cache=JudgeCache(cache_path))


CLAIM, PASSAGES = "The plan costs $5 per month.", ["The plan costs $5 per month, billed monthly.", "Cats."]


def test_put_get_roundtrip_keeps_value_usage_and_decodable_parts(tmp_path):
    with JudgeCache(tmp_path / "c.sqlite") as cache:
        parts = {"kind": "openai", "model": "m", "endpoint": "http://h/v1", "prompt_id": "extract",
                 "prompt_version": "1", "schema_version": "s", "messages": [{"role": "user", "content": "x"}]}
        key = cache_key(parts)
        assert cache.get(key) is None
        cache.put(key, parts, {"verdicts": []}, {"prompt_tokens": 7, "completion_tokens": 3})
        cache.put(key, parts, {"verdicts": ["other"]})  # first writer wins; identical in practice
        assert cache.get(key) == ({"verdicts": []}, {"prompt_tokens": 7, "completion_tokens": 3})
        stats = cache.stats()
    assert stats["entries"] == 1 and stats["prompt_tokens"] == 7
    assert stats["groups"][0]["prompt"] == "extract@1"


def test_key_changes_with_every_part():
    base = {"kind": "openai", "model": "m", "endpoint": "e", "prompt_id": "extract", "prompt_version": "1",
            "schema_version": "s", "temperature": 0.0, "messages": [{"role": "user", "content": "x"}]}
    keys = {cache_key(base)}
    for k, v in [("kind", "local"), ("model", "m2"), ("endpoint", "e2"), ("prompt_id", "decompose"),
                 ("prompt_version", "2"), ("schema_version", "t"), ("temperature", 0.5),
                 ("messages", [{"role": "user", "content": "y"}])]:
        keys.add(cache_key({**base, k: v}))
    assert len(keys) == 9
    assert cache_key(dict(reversed(list(base.items())))) == cache_key(base)  # order-free


def test_endpoint_label_drops_credentials_query_and_trailing_slash():
    assert endpoint_label("HTTPS://user:secret@Host.example:8443/v1/?api-key=s3cr3t#x") == "https://host.example:8443/v1"
    assert endpoint_label("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080/v1"


def test_rerun_is_served_from_cache_with_zero_requests(server, tmp_path):
    path = tmp_path / "c.sqlite"
    first = _judge(server, path)
    verdicts = first.judge(CLAIM, PASSAGES)
    claims = first.decompose("It costs $5. It has 250 GB.")
    assert server.count == 2 and first.stats.calls == 2 and first.stats.prompt_tokens == 200
    again = _judge(server, path)
    t0 = time.perf_counter()
    assert again.judge(CLAIM, PASSAGES) == verdicts
    assert again.decompose("It costs $5. It has 250 GB.") == claims
    elapsed = time.perf_counter() - t0
    assert server.count == 2, "a cached call went to the server"
    assert again.stats.calls == 0 and again.stats.cache_hits == 2 and again.stats.prompt_tokens == 0
    assert elapsed < 0.5


def test_cache_keys_differ_by_model_endpoint_and_prompt_version(server, tmp_path):
    path = tmp_path / "c.sqlite"
    _judge(server, path).judge(CLAIM, PASSAGES)
    _judge(server, path, model="other-model").judge(CLAIM, PASSAGES)
    assert server.count == 2
    with FakeOpenAIServer() as elsewhere:  # same model, other endpoint
        _judge(elsewhere, path).judge(CLAIM, PASSAGES)
        assert elsewhere.count == 1
    bumped = _judge(server, path)
    bumped._prompts = {k: dataclasses.replace(p, version=p.version + ".1") for k, p in bumped._prompts.items()}
    bumped.judge(CLAIM, PASSAGES)
    assert server.count == 3
    _judge(server, path, temperature=0.7).judge(CLAIM, PASSAGES)  # an answer-changing option
    assert server.count == 4
    _judge(server, path, timeout_s=9, max_concurrency=1).judge(CLAIM, PASSAGES)  # transport knobs are not
    assert server.count == 4
    with JudgeCache(path) as cache:
        models = {g["model"] for g in cache.stats()["groups"]}
    assert models == {"fake-model", "other-model"}


def test_failures_and_refusals_are_not_cached(server, tmp_path):
    path = tmp_path / "c.sqlite"
    server.push(server_error(), server_error(), refusal())
    judge = _judge(server, path)
    assert judge.judge(CLAIM, PASSAGES)[0].kind == "http_error"
    assert judge.judge(CLAIM, PASSAGES)[0].kind == "refusal"
    with JudgeCache(path) as cache:
        assert len(cache) == 0
    assert judge.judge(CLAIM, PASSAGES)[0].verdict == "supported"  # asked again, now cached
    with JudgeCache(path) as cache:
        assert len(cache) == 1


def _writes(cache: JudgeCache, prefix: str, n: int) -> None:
    for i in range(n):
        parts = {"kind": "openai", "model": prefix, "messages": [{"role": "user", "content": f"{prefix}-{i}"}]}
        cache.put(cache_key(parts), parts, {"i": i}, {"prompt_tokens": 1, "completion_tokens": 1})


_WRITER = textwrap.dedent("""
    import sys
    from ragspan.tasks.judges.cache import JudgeCache, cache_key
    cache = JudgeCache(sys.argv[1])
    for i in range(int(sys.argv[3])):
        parts = {"kind": "openai", "model": sys.argv[2], "messages": [{"role": "user", "content": f"{sys.argv[2]}-{i}"}]}
        cache.put(cache_key(parts), parts, {"i": i}, {"prompt_tokens": 1, "completion_tokens": 1})
""")


def test_concurrent_writers_threads_and_processes_lose_nothing(tmp_path):
    path = tmp_path / "c.sqlite"
    shared = JudgeCache(path)
    procs = [subprocess.Popen([PY, "-c", _WRITER, str(path), f"proc{k}", "150"]) for k in range(2)]
    threads = [threading.Thread(target=_writes, args=(shared, f"shared{k}", 100)) for k in range(4)]
    threads += [threading.Thread(target=_writes, args=(JudgeCache(path), f"own{k}", 100)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(p.wait(timeout=60) == 0 for p in procs)
    with JudgeCache(path) as cache:
        stats = cache.stats()
    assert stats["entries"] == 2 * 150 + 6 * 100
    assert {g["model"]: g["entries"] for g in stats["groups"]} == (
        {f"proc{k}": 150 for k in range(2)} | {f"shared{k}": 100 for k in range(4)} | {f"own{k}": 100 for k in range(2)})


_JUDGING_RUN = textwrap.dedent("""
    import sys
    from types import SimpleNamespace
    from ragspan.tasks.judges.cache import JudgeCache
    from ragspan.tasks.judges.openai_judge import OpenAIJudge, openai_spec
    spec = openai_spec(SimpleNamespace(model="fake-model", base_url=sys.argv[1], max_concurrency=1))
    judge = OpenAIJudge(spec, cache=JudgeCache(sys.argv[2]))
    for i in range(int(sys.argv[3])):
        judge.judge(f"Claim number {i} costs $5.", [f"Passage {i}: claim number {i} costs $5."])
        print(i, flush=True)
""")


def test_sigkill_mid_run_loses_no_finished_call_and_resume_repeats_none(tmp_path):
    path, n = tmp_path / "c.sqlite", 40
    with FakeOpenAIServer(delay=0.03) as server:
        proc = subprocess.Popen([PY, "-c", _JUDGING_RUN, server.url, str(path), str(n)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        finished = 0
        for line in proc.stdout:  # wait for a dozen finished calls, then kill -9 mid-call
            finished = int(line) + 1
            if finished >= 12:
                break
        time.sleep(0.015)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        first_run = server.bodies_digests()
        with JudgeCache(path) as cache:
            stored = len(cache)
        # Every call the child saw finish is stored; at most the one in flight is lost.
        assert finished <= stored <= len(first_run) <= stored + 1
        server.reset()
        resumed = OpenAIJudge(openai_spec(SimpleNamespace(model="fake-model", base_url=server.url,
                                                          max_concurrency=1)), cache=JudgeCache(path))
        for i in range(n):  # the same calls as the killed run, in this process
            [v] = resumed.judge(f"Claim number {i} costs $5.", [f"Passage {i}: claim number {i} costs $5."])
            assert v.verdict == "supported"
        second_run = server.bodies_digests()
        assert resumed.stats.cache_hits == stored
    assert len(second_run) == n - stored, "the resumed run repeated a finished call"
    assert not set(second_run) & set(first_run[:stored])
    with JudgeCache(path) as cache:
        assert len(cache) == n


def _cli(*argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="ragspan")
    cache_cmd.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args), ""


def test_cache_stats_and_clear_commands(tmp_path, capsys):
    path = str(tmp_path / "c.sqlite")
    with JudgeCache(path) as cache:
        for model in ("m1", "m2"):
            for pid, ver in (("extract", "1"), ("extract", "2"), ("decompose", "1")):
                parts = {"kind": "openai", "model": model, "prompt_id": pid, "prompt_version": ver,
                         "messages": [{"role": "user", "content": f"{model}{pid}{ver}"}]}
                cache.put(cache_key(parts), parts, {"ok": True}, {"prompt_tokens": 10, "completion_tokens": 2})
    assert _cli("cache", "stats", "--path", path)[0] == 0
    out = capsys.readouterr().out
    assert "entries: 6" in out and "m1" in out and "extract@2" in out
    assert _cli("cache", "stats", "--json", "--path", path)[0] == 0
    assert json.loads(capsys.readouterr().out)["entries"] == 6
    assert _cli("cache", "clear", "--model", "m1", "--prompt-version", "extract@2", "--path", path)[0] == 0
    assert "removed 1 judge-cache entry" in capsys.readouterr().out
    _cli("cache", "clear", "--prompt-version", "1", "--path", path)
    assert "removed 4" in capsys.readouterr().out
    _cli("cache", "clear", "--path", path)
    assert "removed 1 " in capsys.readouterr().out
    with JudgeCache(path) as cache:
        assert len(cache) == 0


def test_default_cache_lives_in_the_state_dir(state_dir):
    with JudgeCache() as cache:
        assert cache.path == state_dir / "judge-cache.sqlite"


def test_cache_commands_report_and_empty_the_answer_store_and_input_cache(state_dir, capsys):
    from conftest import SAMPLE
    from ragspan.tasks.inputs.load import load_workspace

    load_workspace(SAMPLE, "baseline", 800, 100, 3)  # fills the validated-inputs cache
    (state_dir / "answers" / "ctx" / "seg-1").mkdir(parents=True)
    (state_dir / "answers" / "ctx" / "seg-1" / "claims.parquet").write_bytes(b"x" * 1000)
    assert _cli("cache", "stats", "--json")[0] == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["answer_store"]["entries"] == 1 and stats["answer_store"]["bytes"] == 1000
    # base + the run's workspace, as two entries: its head and its large tables (read at first use)
    kinds = sorted(p.name.split("-", 1)[0] for p in (state_dir / "inputs").iterdir() if not p.name.startswith("."))
    assert kinds == ["base", "tables", "ws"]
    assert stats["inputs"]["entries"] == 3 and stats["inputs"]["bytes"] > 0
    assert _cli("cache", "clear", "--answers")[0] == 0
    assert not (state_dir / "answers").exists() and (state_dir / "inputs").exists()
    assert _cli("cache", "clear", "--inputs")[0] == 0
    assert not (state_dir / "inputs").exists()
    assert "removed" in capsys.readouterr().out
