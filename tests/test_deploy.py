"""`prefect deploy` of the prefect.yaml `ragspan init` writes (flows/deploy.py).

Fast: the YAML is the deployment `ragspan serve` serves (one source: build_deployment),
and Prefect's own prefect.yaml model and trigger code accept it.

End to end (one test, ~1 min): `ragspan init` on a copy of the sample → a real `prefect
server` on 127.0.0.1 → `prefect work-pool create --type process` → `prefect deploy --all`
in the workspace → `prefect worker start` → `ragspan notify index-rebuilt` → the worker
runs the watch flow to Completed: results, history record, DVC experiment. The worker is
stopped (SIGTERM) before the server, both by PID.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
import yaml
from conftest import SAMPLE
from ragspan.flows import deploy
from ragspan.flows import serve as serve_mod
from ragspan.flows import watch as watch_mod
from ragspan.tasks.reporting.history import read_history
from servers import BIN, CLI, api_call, clean_env, prefect_server, stop, wait_for

pytestmark = pytest.mark.e2e  # slow, end to end: `pytest -m "not e2e"` leaves it out


def test_the_yaml_is_the_served_deployment_and_prefect_accepts_it():
    from prefect.cli.deploy._models import PrefectYamlModel
    from prefect.cli.deploy._triggers import _initialize_deployment_triggers

    text = deploy.prefect_yaml(cron="", schedule_index="docs")
    spec = yaml.safe_load(text)
    PrefectYamlModel.model_validate(spec)  # the model `prefect deploy` reads prefect.yaml with
    (d,) = spec["deployments"]
    served = serve_mod.build_deployment(__import__("pathlib").Path("."), "params.yaml", "0 6 * * *", "UTC", None,
                                        schedule_index="docs")
    assert d["entrypoint"] == served.entrypoint == "ragspan.flows.watch.watch"
    (trigger,) = _initialize_deployment_triggers(d["name"], d["triggers"])
    assert trigger.expect == served.triggers[0].expect == {watch_mod.EVENT}
    assert trigger.parameters == served.triggers[0].parameters
    assert trigger.match.model_dump() == {"prefect.resource.id": "ragspan.index.*"}
    (schedule,) = d["schedules"]
    assert schedule["cron"] == deploy.DEFAULT_CRON and schedule["active"] is False  # no cron in params: off
    assert schedule["parameters"] == dict(served.schedules[0].parameters)
    assert d["concurrency_limit"] == {"limit": 1, "collision_strategy": "ENQUEUE"}
    assert d["work_pool"]["name"] == deploy.WORK_POOL and spec["pull"] is None
    on = yaml.safe_load(deploy.prefect_yaml(cron="*/5 * * * *", timezone="Europe/Paris"))["deployments"][0]
    assert on["schedules"][0] | {"parameters": None} == {"cron": "*/5 * * * *", "timezone": "Europe/Paris",
                                                         "active": True, "parameters": None}


def test_prefect_deploy_and_a_process_worker_run_the_triggered_watch_flow(tmp_path):
    env = clean_env(tmp_path)
    (tmp_path / "gitconfig").write_text("[user]\n\tname = ragspan-test\n\temail = ragspan-test@example.invalid\n")
    ws = tmp_path / "ws"
    env["RAGSPAN_HOME"] = str(tmp_path / "state")

    def sh(*cmd, e=env, timeout=180):
        out = subprocess.run(list(cmd), check=False, cwd=ws, env=e, capture_output=True, text=True, timeout=timeout)
        assert out.returncode == 0, f"{cmd}: {out.returncode}\n{out.stdout}\n{out.stderr}"
        return out

    ws.mkdir()
    marks: dict[str, float] = {}
    t0 = time.monotonic()
    init = subprocess.Popen([sys.executable, "-c", CLI, "init", "--data", str(SAMPLE)], cwd=ws, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # while the server starts
    with prefect_server(tmp_path, env, ws) as api:
        marks["server"] = round(time.monotonic() - t0, 1)
        said = init.communicate(timeout=180)[0]
        assert init.returncode == 0, said
        marks["init"] = round(time.monotonic() - t0, 1)
        assert sh("git", "ls-files", "prefect.yaml").stdout.strip() == "prefect.yaml"  # committed by init
        penv = {**env, "PREFECT_API_URL": api, "PREFECT_HOME": str(tmp_path / "prefect-client"),
                "PREFECT_WORKER_QUERY_SECONDS": "2"}
        prefect = str(BIN / "prefect")
        sh(prefect, "work-pool", "create", deploy.WORK_POOL, "--type", "process", e=penv)
        sh(prefect, "--no-prompt", "deploy", "--all", e=penv)
        marks["deployed"] = round(time.monotonic() - t0, 1)
        assert not sh("git", "status", "--porcelain", "prefect.yaml").stdout  # deploy took it as written

        async def deployment(client):
            return await client.read_deployment_by_name("watch/" + serve_mod.DEPLOYMENT)
        dep = api_call(api, deployment)
        assert dep.work_pool_name == deploy.WORK_POOL and dep.global_concurrency_limit.limit == 1
        assert dep.pull_steps == [{"prefect.deployments.steps.set_working_directory": {"directory": str(ws)}}]

        log = open(tmp_path / "worker.log", "w")  # noqa: SIM115
        # A worker stops on SIGTERM by sending itself SIGINT: give it a SIGINT that is not ignored.
        worker = subprocess.Popen([prefect, "worker", "start", "--pool", deploy.WORK_POOL], cwd=tmp_path, env=penv,
                                  stdout=log, stderr=subprocess.STDOUT,
                                  preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509
        try:
            async def workers(client):
                return await client.read_workers_for_work_pool(deploy.WORK_POOL)
            wait_for(lambda: api_call(api, workers), 90, "the worker to come online", 1.0)
            marks["worker up"] = round(time.monotonic() - t0, 1)
            fired = time.time()
            sh(sys.executable, "-c", CLI, "notify", "index-rebuilt", "--index", "demo", "--version", "v1",
               "--run", "data/runs/baseline.jsonl", e=penv)

            async def runs(client):
                return await client.read_flow_runs()

            def finished():
                done = [r for r in api_call(api, runs) if r.deployment_id == dep.id
                        and r.state_type and r.state_type.value in ("COMPLETED", "FAILED", "CRASHED")]
                return done or None
            (run,) = wait_for(finished, 150, "the worker's triggered run", 1.0)
            marks["run done"] = round(time.monotonic() - t0, 1)
            assert run.state_type.value == "COMPLETED", (run.state.message, (tmp_path / "worker.log").read_text()[-3000:])
            assert run.work_pool_name == deploy.WORK_POOL and run.parameters["trigger"] == "event"
            (h,) = read_history(ws)
            assert h["flow_run_id"] == str(run.id) and h["index"] == "demo" and h["version"] == "v1"
            assert h["source"] == "event run file" and h["claims"] > 0
            assert h["experiment"]["sha"] and (ws / "results" / "demo" / "metrics.json").is_file()
            latency = run.start_time.timestamp() - fired
            duration = (run.end_time - run.start_time).total_seconds()
        finally:
            code = stop(worker, timeout=60)
            log.close()
        assert code == 0
    print(f"\nevent → worker run start {latency:.1f} s; run {duration:.1f} s; {marks}")
