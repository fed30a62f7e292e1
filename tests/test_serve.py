"""Scheduled and index-triggered runs (flows/serve.py, flows/watch.py, tasks/tools/demo_rag.py).

Fast tests: the demo RAG (deterministic, every mistake kind), the event → parameter
mapping rendered by Prefect's own server-side template code, the rag.command template,
run installation, the history table and the deployment object.

End to end (one test, ~1–2 min): a real `prefect server start` on 127.0.0.1 (started
with `ragspan server start`, temporary PREFECT_HOME), `ragspan serve` against it, in a
git + DVC workspace holding a copy of the sample. `ragspan notify index-rebuilt` →
the triggered run completes → results, history record and DVC experiment; the demo
index is rebuilt as v2 and notified twice more (the two runs queue, never overlap) →
`ragspan compare` of the two experiments shows rank failures and misses turned correct;
an event naming a missing run file gives a Failed run with the reason. Serve is stopped
(SIGTERM) before the server, both by PID.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from conftest import SAMPLE
from ragspan.flows import serve as serve_mod
from ragspan.flows import watch as watch_mod
from ragspan.tasks.errors import ConfigError
from ragspan.tasks.reporting import history as history_file
from ragspan.tasks.reporting.results_files import read_results
from ragspan.tasks.tools import demo_rag, rag_command
from servers import free_port as _free_port
from servers import healthy as _healthy
from servers import wait_for as _wait

BIN = Path(sys.executable).parent
GIT_ID = ["-c", "user.name=ragspan-test", "-c", "user.email=ragspan-test@example.invalid"]
_CLI = ("import sys, ragspan.flows.cli as c; c._COMMAND_MODULES = tuple(dict.fromkeys("
        "(*c._COMMAND_MODULES, 'ragspan.flows.cli.serve', 'ragspan.flows.cli.compare'))); "
        "sys.exit(c.main(sys.argv[1:]))")
RAG_COMMAND = "{python} -m ragspan.tasks.tools.demo_rag answer --data {data_dir} --index {index} --out {out}"
KINDS = {"correct", "rank_failure", "retrieval_miss", "synthesis_error", "hallucination"}


# ----- demo RAG ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo-index")
    out = {}
    for version in ("v1", "v2"):
        index_dir = demo_rag.build_index(SAMPLE, demo_rag.spec_for(version), root / version)
        out[version] = demo_rag.demo_run(SAMPLE, index_dir)
    out["v1-again"] = demo_rag.demo_run(SAMPLE, root / "v1")
    return out


def test_demo_rag_is_deterministic_and_makes_every_mistake(demo_runs):
    records, intended = demo_runs["v1"]
    assert demo_runs["v1-again"] == demo_runs["v1"]
    assert set(intended.values()) == KINDS
    assert len(records) == 38 and all(r["retrieved"] and r["answer"] for r in records)
    assert all(r["context_k"] == 2 for r in records)


def test_demo_index_version_changes_the_run(demo_runs):
    (r1, i1), (r2, i2) = demo_runs["v1"], demo_runs["v2"]
    assert r1 != r2
    count = lambda d, k: sum(v == k for v in d.values())
    assert count(i2, "correct") > count(i1, "correct")
    assert count(i2, "rank_failure") < count(i1, "rank_failure")
    assert count(i2, "retrieval_miss") < count(i1, "retrieval_miss")
    # the answerer's behaviour per question does not depend on the index
    assert {q for q, v in i1.items() if v == "hallucination"} == {q for q, v in i2.items() if v == "hallucination"}


def test_demo_index_holds_what_its_version_says(tmp_path):
    from ragspan.tasks.inputs.load import load_workspace

    chunks = load_workspace(SAMPLE, None, 800, 100, 3).chunks
    one = demo_rag.indexed_chunks(chunks, demo_rag.spec_for("x", chunks_per_doc=1))
    assert len(one) == chunks["doc_id"].nunique() and len(demo_rag.indexed_chunks(chunks, demo_rag.spec_for("v2"))) == len(chunks)
    assert demo_rag.spec_for("v2", rerank=False) == demo_rag.IndexSpec(version="v2", chunks_per_doc=0, rerank=False)
    with pytest.raises(FileNotFoundError, match="no demo index"):
        demo_rag.read_spec(tmp_path)


def test_swap_number_changes_one_number():
    assert demo_rag._swap_number("It costs $15 per month.") == "It costs $25 per month."
    assert demo_rag._swap_number("Up to 99.9% uptime.") == "Up to 29.9% uptime."
    assert demo_rag._swap_number("No digits here.") is None
    assert demo_rag._swap_number("Within 9 days.") == "Within 2 days."


# ----- event → parameters ------------------------------------------------------------------

def _render_like_the_server(template: str, event) -> object:
    """What Prefect's RunDeployment action does with one parameter template."""
    from prefect.server.events.actions import RunDeployment
    from prefect.server.utilities.user_templates import render_user_template_sync

    wrapped = RunDeployment._wrap_v1_template(template)
    if wrapped["__prefect_kind"] == "jinja":
        return render_user_template_sync(wrapped["template"], {"event": event})
    return json.loads(render_user_template_sync(wrapped["value"]["template"], {"event": event}))


@pytest.mark.parametrize("payload", [{}, {"version": "v2", "run": "runs/new.jsonl", "revision": "abc123"},
                                     {"version": 7}])
def test_event_parameters_render_for_any_payload(payload):
    from prefect.server.events.schemas.events import ReceivedEvent

    event = ReceivedEvent(id=uuid.uuid4(), occurred=datetime.now(UTC), event=watch_mod.EVENT,
                          resource={"prefect.resource.id": "ragspan.index.prod-docs"}, payload=payload)
    templates = watch_mod.event_parameters("/ws", "params.yaml")
    rendered = {k: _render_like_the_server(v, event) for k, v in templates.items()}
    assert watch_mod.index_name(rendered["index"]) == "prod-docs"
    assert watch_mod._clean(rendered["version"]) == str(payload.get("version", ""))
    assert watch_mod._clean(rendered["run_path"]) == payload.get("run", "")
    assert watch_mod._clean(rendered["revision"]) == payload.get("revision", "")
    assert rendered["event_id"] == str(event.id)
    assert rendered["trigger"] == "event" and rendered["workspace"] == "/ws"


def test_names_are_safe_for_files_refs_and_experiments():
    when = datetime(2026, 12, 1, 10, 15, 2, tzinfo=UTC)
    assert watch_mod.record_name("event", "prod docs/v2", when) == "event-prod-docs-v2-20261201T101502Z"
    assert watch_mod.record_name("schedule", "", when) == "schedule-default-20261201T101502Z"
    assert watch_mod.safe_name("..//") == "run"
    assert watch_mod.index_name("ragspan.index.demo") == "demo" and watch_mod.index_name("None") == ""


def test_rag_command_template():
    values = {"data_dir": "/d d", "out": "/o.jsonl", "index": "demo", "python": "/py", "questions": "/d d/q.csv",
              "version": "", "revision": "", "run": "r"}
    argv = rag_command.fill_command("{python} -m x --data {data_dir} --out={out} -i {index}", values)
    assert argv == ["/py", "-m", "x", "--data", "/d d", "--out=/o.jsonl", "-i", "demo"]
    with pytest.raises(ConfigError, match="unknown placeholder {nope}"):
        rag_command.fill_command("run {nope}", values)


def test_watch_params_live_in_settings_outside_the_fingerprint(tmp_path, state_dir):
    from ragspan.tasks.config import load_settings

    p = tmp_path / "params.yaml"
    p.write_text(yaml.safe_dump({"judge": {"support_threshold": 0.8}, "rag": {"command": RAG_COMMAND},
                                 "schedule": {"cron": "*/5 * * * *"}}))
    wp = watch_mod.load_watch_params(p)
    assert wp.rag.command == RAG_COMMAND and wp.schedule.cron == "*/5 * * * *" and wp.rag.index == "demo"
    assert watch_mod.evaluate_params(p) == p
    # a new cron line or RAG command must not invalidate every cache
    p2 = tmp_path / "params2.yaml"
    p2.write_text(yaml.safe_dump({"judge": {"support_threshold": 0.8}}))
    assert load_settings(p).fingerprint() == load_settings(p2).fingerprint()
    p.write_text(yaml.safe_dump({"rag": {"comand": "typo"}}))
    with pytest.raises(ConfigError, match="comand"):
        watch_mod.load_watch_params(p)


def test_a_bad_run_is_refused_and_nothing_lands(tmp_path, state_dir):
    from ragspan.tasks.config import load_settings
    from ragspan.tasks.errors import InputError

    data = tmp_path / "data"
    shutil.copytree(SAMPLE, data)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question_id": "q01", "answer": "x", "retrieved": [{"chunk_id": "nope#9"}]}\n')
    with pytest.raises(InputError):
        rag_command.install_run(bad, data, "new", load_settings(None))
    assert not list((data / "runs").glob("*new*")) and not list((data / "runs").glob(".*"))
    good = rag_command.install_run(SAMPLE / "runs" / "baseline.jsonl", data, "new", load_settings(None))
    assert good.read_bytes() == (SAMPLE / "runs" / "baseline.jsonl").read_bytes()


def test_history_file_and_table(tmp_path):
    rec = {"name": "event-demo-1", "trigger": "event", "index": "demo", "version": "v1", "claims": 36,
           "finished": "2026-12-01T10:15:09+00:00", "rates": {"correct": 0.5, "rank_failure": 0.25},
           "experiment": {"name": "event-demo-1"}}
    history_file.append_history(tmp_path, rec)
    with open(tmp_path / history_file.HISTORY, "a") as fh:
        fh.write('{"torn": ')  # a crash mid-append loses that line only
    assert history_file.read_history(tmp_path) == [rec]
    table = history_file.history_table([rec])
    assert "50%" in table and "25%" in table and "event-demo-1" in table and "rank" in table


_HISTORY_COMMAND = """
import sys
from ragspan.flows.cli import main
code = main(["history", "--workspace", sys.argv[1]])
print("imported:", sorted(m for m in ("prefect", "pandas", "pydantic", "dvc") if m in sys.modules), code)
"""


def test_history_command_reads_its_file_without_importing_prefect(tmp_path):
    """`ragspan history` is a file read: it answers without Prefect's import time."""
    history_file.append_history(tmp_path, {"name": "schedule-demo-1", "trigger": "schedule", "index": "demo",
                                           "claims": 3, "rates": {"correct": 1.0}})
    done = subprocess.run([sys.executable, "-c", _HISTORY_COMMAND, str(tmp_path)], capture_output=True,
                          text=True, timeout=60, check=True)
    assert "schedule-demo-1" in done.stdout and "100%" in done.stdout, done.stdout
    assert done.stdout.splitlines()[-1] == "imported: [] 0", done.stdout


def test_deployment_has_the_schedule_trigger_and_queue(tmp_path):
    dep = serve_mod.build_deployment(tmp_path, "params.yaml", "0 6 * * *", "UTC", None)
    assert [s.schedule.cron for s in dep.schedules] == ["0 6 * * *"]
    assert dep.schedules[0].parameters["trigger"] == "schedule"
    (trig,) = dep.triggers
    assert trig.expect == {"ragspan.index.rebuilt"}
    assert trig.match.model_dump() == {"prefect.resource.id": "ragspan.index.*"}
    assert dep.concurrency_limit == 1
    assert dep.concurrency_options.collision_strategy.value == "ENQUEUE"
    only = serve_mod.build_deployment(tmp_path, "params.yaml", None, "UTC", "prod")
    assert not only.schedules and only.triggers[0].match.model_dump() == {"prefect.resource.id": "ragspan.index.prod"}


def test_notify_and_serve_need_a_server(monkeypatch, capsys):
    from ragspan.flows.cli import main

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    assert main(["notify", "index-rebuilt", "--index", "x", "--port", str(_free_port())]) == 2
    assert "no Prefect server" in capsys.readouterr().err


# ----- end to end ------------------------------------------------------------------------

def _api(api: str, coro_fn):
    """Run one prefect-client call against `api` (settings are fixed at import: pass it)."""
    from prefect.client.orchestration import PrefectClient

    async def go():
        async with PrefectClient(api=api) as client:
            return await coro_fn(client)

    return asyncio.run(go())


def _runs(api: str) -> list:
    async def read(client):
        return await client.read_flow_runs()
    return [r for r in _api(api, read) if (r.parameters or {}).get("trigger") == "event"]


def _stop(proc: subprocess.Popen, timeout: float = 60) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=timeout)


@pytest.mark.e2e
def test_index_rebuilt_event_runs_evaluates_and_records(tmp_path):
    ws, state = tmp_path / "ws", tmp_path / "state"
    shutil.copytree(SAMPLE, ws / "data")
    (ws / "params.yaml").write_text(yaml.safe_dump({
        "data": {"dir": "data", "runs": ["baseline"]},
        "rag": {"command": RAG_COMMAND, "index": "demo"},
        "schedule": {"cron": "0 6 * * *"},
    }, sort_keys=False))
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    (tmp_path / "gitconfig").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "DVC_", "PREFECT_"))}
    env.update({
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "RAGSPAN_HOME": str(state),
        "PREFECT_HOME": str(tmp_path / "prefect-home"), "DVC_NO_ANALYTICS": "1",
        "DVC_SITE_CACHE_DIR": str(tmp_path / "dvc-site"), "DVC_GLOBAL_CONFIG_DIR": str(tmp_path / "dvc-g"),
        "DVC_SYSTEM_CONFIG_DIR": str(tmp_path / "dvc-s"), "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
    })
    served_env = {**env, "PREFECT_API_URL": api}

    t0 = time.monotonic()
    marks: dict[str, float] = {}

    def mark(what: str) -> None:
        marks[what] = round(time.monotonic() - t0, 1)

    def sh(*cmd, ok=True, e=served_env, timeout=180):
        out = subprocess.run(list(cmd), check=False, cwd=ws, env=e, capture_output=True, text=True, timeout=timeout)
        assert not ok or out.returncode == 0, f"{cmd}: {out.returncode}\n{out.stdout}\n{out.stderr}"
        return out

    def cli(*args, **kw):
        return sh(sys.executable, "-c", _CLI, *args, **kw)

    sh("git", "init", "-q", e=env)
    sh(str(BIN / "dvc"), "init", "-q", e=env)
    sh("git", "add", "-A", e=env)
    sh("git", *GIT_ID, "commit", "-qm", "workspace", e=env)
    cli("demo-rag", "index", "--data", "data", "--index", "demo", "--version", "v1")

    logs = {name: open(tmp_path / f"{name}.log", "w") for name in ("server", "serve")}  # noqa: SIM115
    server = subprocess.Popen([sys.executable, "-c", _CLI, "server", "start", "--port", str(port)], cwd=ws,
                              env=env, stdout=logs["server"], stderr=subprocess.STDOUT)
    serve = None
    try:
        _wait(lambda: _healthy(api), 90, "the Prefect server")
        mark("server up")
        serve = subprocess.Popen([sys.executable, "-c", _CLI, "serve"], cwd=ws, env=served_env,
                                 stdout=logs["serve"], stderr=subprocess.STDOUT)

        async def automations(client):
            return await client.read_automations_by_name("ragspan-watch-on-ragspan.index.rebuilt")
        _wait(lambda: serve.poll() is None and _api(api, automations), 60, "the deployment's trigger", 0.5)

        async def deployment(client):
            return await client.read_deployment_by_name("watch/ragspan-watch")
        dep = _api(api, deployment)
        mark("serving")
        assert [s.schedule.cron for s in dep.schedules] == ["0 6 * * *"]
        assert dep.global_concurrency_limit.limit == 1

        def fire(*args) -> float:
            t = time.time()
            cli("notify", "index-rebuilt", "--index", "demo", *args)
            return t

        def done(n: int):
            runs = _runs(api)
            final = [r for r in runs if r.state_type and r.state_type.value in ("COMPLETED", "FAILED", "CRASHED")]
            return sorted(final, key=lambda r: r.start_time) if len(final) >= n else None

        # 1. index v1 → run → record
        t1 = fire("--version", "v1")
        (run1,) = _wait(lambda: done(1), 120, "the first triggered run")
        assert run1.state_type.value == "COMPLETED", run1.state.message
        mark("run 1")
        latency, duration = run1.start_time.timestamp() - t1, (run1.end_time - run1.start_time).total_seconds()
        (h1,) = history_file.read_history(ws)
        assert h1["trigger"] == "event" and h1["index"] == "demo" and h1["version"] == "v1"
        assert h1["source"] == "rag.command" and h1["flow_run_id"] == str(run1.id)
        assert h1["experiment"]["name"] == h1["name"] and h1["experiment"]["sha"]
        metrics = read_results(ws / "results" / "demo")
        _, intended = demo_rag.demo_run(ws / "data", state / "demo-index" / "demo")
        # the history records exactly the run's taxonomy ...
        assert {k: v for k, v in h1["counts"].items() if v} == {k: v["count"] for k, v in metrics["labels"].items()
                                                                 if v["count"]}
        # ... which is the demo RAG's intended mistakes, up to the local judge's own errors
        # (one swapped number that a below-cutoff chunk seems to support: rank_failure)
        want = {k: list(intended.values()).count(k) for k in KINDS}
        assert sum(abs(h1["counts"].get(k, 0) - want[k]) for k in KINDS) <= 2, (h1["counts"], want)
        assert metrics["claims"] == 38 and metrics["labels"]["rank_failure"]["count"] > 0

        # 2. rebuild the index as v2, notify twice at once: the runs queue, both complete
        cli("demo-rag", "index", "--data", "data", "--index", "demo", "--version", "v2")
        fire("--version", "v2")
        fire("--version", "v2", "--revision", "feedbeef")
        runs = _wait(lambda: done(3), 150, "the two queued runs")
        assert all(r.state_type.value == "COMPLETED" for r in runs), [r.state.message for r in runs]
        mark("runs 2+3")
        assert runs[1].end_time <= runs[2].start_time, "overlapping runs on one workspace"
        history = history_file.read_history(ws)
        assert [h["version"] for h in history] == ["v1", "v2", "v2"]
        # queued runs are not guaranteed to start in event order: one of them carries the revision
        assert sorted(str(h["revision"]) for h in history[1:]) == ["None", "feedbeef"]
        h2 = history[1]
        assert h2["rates"]["correct"] > h1["rates"]["correct"]

        exps = sh(str(BIN / "dvc"), "exp", "list", "--name-only").stdout.split()
        assert {h["name"] for h in history} <= set(exps)
        shown = cli("history").stdout
        assert h1["name"] in shown and h2["name"] in shown

        cmp = cli("compare", h1["name"], h2["name"], "--run", "demo", "--format", "json")
        result = json.loads(cmp.stdout)
        moves = {(t["from"], t["to"]): t["count"] for t in result["transitions"]["changed"]}
        assert moves.get(("rank_failure", "correct"), 0) > 0 and moves.get(("retrieval_miss", "correct"), 0) > 0
        mark("compared")

        # 3. a failing run: visible in Prefect with its reason; no record, nothing half-written
        fire("--run", "runs/missing.jsonl")
        failed = _wait(lambda: done(4), 60, "the failing run")[-1]
        assert failed.state_type.value == "FAILED" and "run file not found" in (failed.state.message or "")
        assert len(history_file.read_history(ws)) == 3
        assert not list((ws / "results").glob(".*tmp*"))
        mark("failed run")
        print(f"\nevent → run start {latency:.2f} s; run duration {duration:.2f} s; "
              f"queued runs: {[(r.end_time - r.start_time).total_seconds() for r in runs[1:]]}; {marks}")
    finally:
        codes = {}
        if serve is not None:
            codes["serve"] = _stop(serve)
        codes["server"] = _stop(server)
        for fh in logs.values():
            fh.close()
    assert serve.poll() is not None and server.poll() is not None
    assert codes == {"serve": 0, "server": 0}, codes
