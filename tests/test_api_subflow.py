"""`ragspan.evaluate_flow` inside a user's own Prefect flow — right after their index-rebuild
task — against a real `prefect server` on 127.0.0.1: it runs as a subflow of the user's
flow run, and a second run is served by the same caches as the command (answer store)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import SAMPLE

SAMPLE_ANSWERS = sum(1 for line in (SAMPLE / "runs" / "baseline.jsonl").read_text(encoding="utf-8").splitlines()
                     if line.strip())
from servers import api_call, clean_env, prefect_server

USER_FLOW = '''
import json, sys
from prefect import flow, task
import ragspan


@task
def rebuild_index(version: str) -> str:
    return version  # the user's indexing step


@flow(name="user-nightly")
def nightly(data_dir: str, out_dir: str) -> dict:
    version = rebuild_index("v2")
    return ragspan.evaluate_flow(data_dir=data_dir, run="baseline", out_dir=f"{out_dir}-{version}")


state = nightly(sys.argv[1], sys.argv[2], return_state=True)
view = state.result()
print(json.dumps({"flow_run": str(state.state_details.flow_run_id), "judge": view["judge"],
                  "labels": {k: v["count"] for k, v in view["labels"].items()}}))
'''


def test_evaluate_flow_is_a_cached_subflow_of_the_users_flow(tmp_path):
    (tmp_path / "user_flow.py").write_text(USER_FLOW, encoding="utf-8")
    env = {**clean_env(tmp_path), "RAGSPAN_HOME": str(tmp_path / "state"),
           "PREFECT_HOME": str(tmp_path / "user-prefect-home"), "PREFECT_LOGGING_LEVEL": "WARNING"}
    with prefect_server(tmp_path, env, tmp_path) as api:
        runs = []
        for out in ("results/first", "results/second"):
            done = subprocess.run([sys.executable, "user_flow.py", str(SAMPLE), out], cwd=tmp_path,
                                  env={**env, "PREFECT_API_URL": api}, capture_output=True, text=True,
                                  timeout=600, check=False)
            assert done.returncode == 0, done.stderr[-3000:]
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))

        async def evaluate_runs(client):
            children = []
            for flow_run in await client.read_flow_runs():
                if (await client.read_flow(flow_run.flow_id)).name == "evaluate":
                    parent = await client.read_task_run(flow_run.parent_task_run_id)
                    children.append((str(parent.flow_run_id), flow_run.state_type.value))
            return children

        children = api_call(api, evaluate_runs)

    # each user flow run holds exactly one evaluate subflow run, completed
    assert sorted(children) == sorted((r["flow_run"], "COMPLETED") for r in runs)
    first, second = runs
    assert first["judge"]["calls"] > 0 and first["judge"]["answers_reused"] == 0
    assert second["judge"]["answers_reused"] == SAMPLE_ANSWERS and second["judge"]["calls"] == 0  # every sample answer
    assert second["judge"]["task_states"] == {}  # no step ran again
    assert second["labels"] == first["labels"]
    assert (Path(tmp_path) / "results" / "second-v2" / "report.html").is_file()
