"""The watchdog as a new user meets it: a fresh `git clone` where `dvc repro` has not run.

An origin repository laid out like ragspan's own (the sample under data/sample, the
project's params.yaml, an evaluate stage per run and the aggregate stage) runs `dvc repro`
and commits; its DVC outs stay in its own cache. The test clones it and follows the
README's watchdog lines in the clone, against a real `prefect server` on a free
127.0.0.1 port: `ragspan serve`, then `ragspan notify index-rebuilt --index demo
--version v2` with no demo index built yet. The triggered run must build the index,
evaluate, save its DVC experiment although `results/baseline/claims.parquet` and
`reports/summary.md` are missing, append its history line and publish its Prefect
artifacts. Then docs/operations.md's next lines: the index rebuilt as v1, a second run,
`ragspan compare` of the two experiments; `dvc repro` in the clone publishes the stage's
artifacts to the same server. A third run whose `dvc exp save` cannot work (a
broken .dvc/config) must still end Completed with its results, its state message and
history line saying why."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, SAMPLE
from ragspan.tasks.reporting.history import read_history
from servers import api_call, artifacts, clean_env, prefect_server, stop, wait_for

pytestmark = pytest.mark.e2e  # slow, end to end: `pytest -m "not e2e"` leaves it out

BIN = Path(sys.executable).parent
RAGSPAN = str(BIN / "ragspan")
GIT_ID = ["-c", "user.name=ragspan-test", "-c", "user.email=ragspan-test@example.invalid"]


def _origin(root: Path, env: dict) -> None:
    """ragspan's layout with the project's params.yaml and its stages (deps reduced to
    the data: the origin holds no source tree)."""
    shutil.copytree(SAMPLE, root / "data" / "sample")
    shutil.copyfile(REPO / "params.yaml", root / "params.yaml")
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    stages["evaluate"]["do"]["deps"] = ["${data.dir}"]
    stages["aggregate"]["deps"] = ["results"]
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}, sort_keys=False))
    (root / ".gitignore").write_text(".ragspan/\n")
    for cmd in (["git", "init", "-q"], [str(BIN / "dvc"), "init", "-q"], [str(BIN / "dvc"), "repro", "-q"],
                ["git", "add", "-A"], ["git", *GIT_ID, "commit", "-qm", "evaluated sample"]):
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, f"{cmd}: {done.stdout}\n{done.stderr}"


def _event_runs(api: str) -> list:
    async def read(client):
        return await client.read_flow_runs()
    return [r for r in api_call(api, read) if (r.parameters or {}).get("trigger") == "event"]


def _finished(api: str, n: int):
    final = [r for r in _event_runs(api) if r.state_type and r.state_type.value in ("COMPLETED", "FAILED", "CRASHED")]
    return sorted(final, key=lambda r: r.start_time) if len(final) >= n else None


def test_readme_watchdog_lines_work_in_a_fresh_clone(tmp_path):
    env = clean_env(tmp_path)
    env["RAGSPAN_HOME"] = str(tmp_path / "origin-state")
    _origin(tmp_path / "origin", env)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(tmp_path / "origin"), str(clone)], env=env, check=True, timeout=60)
    assert not (clone / "results" / "baseline" / "claims.parquet").exists()
    assert (clone / "results" / "baseline" / "metrics.json").is_file()  # a git-tracked metric
    env["RAGSPAN_HOME"] = str(clone / ".ragspan")  # what `ragspan serve` sets: the clone's own state

    def sh(*cmd, e, timeout=180):
        done = subprocess.run(list(cmd), cwd=clone, env=e, capture_output=True, text=True, timeout=timeout, check=False)
        assert done.returncode == 0, f"{cmd}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done

    with prefect_server(tmp_path, env, clone) as api:
        served = {**env, "PREFECT_API_URL": api}
        log = open(tmp_path / "serve.log", "w")  # noqa: SIM115
        serve = subprocess.Popen([RAGSPAN, "serve", "--cron", "0 6 * * *"], cwd=clone, env=served,
                                 stdout=log, stderr=subprocess.STDOUT)
        try:
            async def automations(client):
                return await client.read_automations_by_name("ragspan-watch-on-ragspan.index.rebuilt")
            wait_for(lambda: serve.poll() is None and api_call(api, automations), 90, "the deployment's trigger", 0.5)

            # README: notify without building the demo index first
            sh(RAGSPAN, "notify", "index-rebuilt", "--index", "demo", "--version", "v2", e=served)
            (run1,) = wait_for(lambda: _finished(api, 1), 180, "the triggered run")
            assert run1.state_type.value == "COMPLETED", run1.state.message
            (h1,) = read_history(clone)
            spec = json.loads((clone / ".ragspan" / "demo-index" / "demo" / "index.json").read_text())["spec"]
            assert spec["version"] == "v2"  # built on first use, as the event's version
            assert h1["experiment"]["name"] == h1["name"] and h1["experiment"]["sha"] and "record_error" not in h1
            assert set(h1["experiment"]["skipped"]) == {"evaluate@baseline", "aggregate"}
            assert h1["name"] in sh(str(BIN / "dvc"), "exp", "list", "--name-only", e=env).stdout.split()
            saved = sh("git", "show", "--name-only", "--format=", h1["experiment"]["sha"], e=env).stdout.split()
            assert "results/demo/metrics.json" in saved and "data/sample/runs/demo.jsonl" in saved
            metrics = json.loads((clone / "results" / "demo" / "metrics.json").read_text())
            assert metrics["claims"] == h1["claims"] > 0

            # the run's Prefect artifacts, under the index's stable keys
            (table,) = artifacts(api, "ragspan-demo-rates")
            (page,) = artifacts(api, "ragspan-demo")
            rows = {r["label"]: r["count"] for r in json.loads(table.data)}
            assert rows == {k: v["count"] for k, v in metrics["labels"].items()}
            assert str((clone / "results" / "demo" / "report.html").resolve()) in page.data

            # 2. docs/operations.md: rebuild the index (v1 this time), notify, compare the experiments
            sh(RAGSPAN, "demo-rag", "index", "--index", "demo", "--version", "v1", e=env)
            sh(RAGSPAN, "notify", "index-rebuilt", "--index", "demo", "--version", "v1", e=served)
            run2 = wait_for(lambda: _finished(api, 2), 180, "the second triggered run")[-1]
            assert run2.state_type.value == "COMPLETED", run2.state.message
            h2 = read_history(clone)[-1]
            assert h2["experiment"]["sha"] and h2["version"] == "v1"
            cmp = json.loads(sh(RAGSPAN, "compare", h1["name"], h2["name"], "--run", "demo", "--format", "json",
                                e=env).stdout)
            moves = {(t["from"], t["to"]): t["count"] for t in cmp["transitions"]["changed"]}
            assert moves.get(("correct", "rank_failure"), 0) > 0, moves  # v1 ranks worse than v2
            pages = artifacts(api, "ragspan-demo")
            assert len(pages) == 2 and "change vs previous" in pages[-1].data

            # the DVC stages publish too: `dvc repro` in the clone, against the same server
            sh(str(BIN / "dvc"), "repro", "-q", e=served, timeout=600)
            (stage_page,) = artifacts(api, "ragspan-baseline")
            assert str((clone / "results" / "baseline" / "report.html").resolve()) in stage_page.data
            assert (clone / "results" / "baseline" / "claims.parquet").is_file()

            # 3. DVC cannot save: the evaluation still completes, and says what failed
            (clone / ".dvc" / "config").write_text("[core\nbroken")
            sh(RAGSPAN, "notify", "index-rebuilt", "--index", "demo", "--version", "v1", e=served)
            run3 = wait_for(lambda: _finished(api, 3), 180, "the third triggered run")[-1]
            assert run3.state_type.value == "COMPLETED", run3.state.message
            assert "experiment was not recorded" in (run3.state.message or "")
            h3 = read_history(clone)[-1]
            assert h3["experiment"] is None and h3["record_error"] and h3["claims"] == h2["claims"]
            assert (clone / "results" / "demo" / "report.html").is_file()
            assert "error" in sh(RAGSPAN, "history", e=env).stdout
        finally:
            assert stop(serve) == 0
            log.close()
