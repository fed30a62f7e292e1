"""One path into the evaluate flow (flows/evaluation.py): the command, the Python API and
the watch flow (what `ragspan serve` and `prefect deploy` run) each reach the flow through
`run_evaluate_flow`, so a params file's `pipeline.shard_concurrency` sizes the task
runner on all three, and the API says `run=` where the command says `--run`.

The runner is observed, not replaced: `task_runner` is wrapped to record what it was
asked for, and the flow runs on the runner it really built, against a real Prefect test
server."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import ragspan
import yaml
from conftest import SAMPLE
from ragspan.flows import runners
from ragspan.flows.cli import main
from ragspan.tasks.errors import UsageError

SHARD_CONCURRENCY = 3  # not the default (2): only the params file can have set it

pytestmark = pytest.mark.usefixtures("prefect_server", "state_dir")


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace (cwd) holding a copy of the sample and a params.yaml that sets
    shard_concurrency and names the run."""
    shutil.copytree(SAMPLE, tmp_path / "data")
    params = {"data": {"dir": "data", "runs": ["baseline"]},
              "pipeline": {"shard_concurrency": SHARD_CONCURRENCY, "shard_size": 10}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def built_runners(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """(runner class, shards in flight asked for) of every task runner built during the test."""
    built: list[tuple[str, int]] = []
    real = runners.task_runner

    def recording(kind, shard_concurrency, dask_address=None):
        runner = real(kind, shard_concurrency, dask_address)
        built.append((type(runner).__name__, shard_concurrency))
        return runner

    monkeypatch.setattr(runners, "task_runner", recording)
    return built


def test_the_command_runs_the_flow_with_the_params_shard_concurrency(workspace, built_runners):
    assert main(["evaluate", "--out", "results/cli", "--quiet"]) == 0
    assert built_runners == [("ThreadPoolTaskRunner", SHARD_CONCURRENCY)]
    assert (workspace / "results" / "cli" / "metrics.json").is_file()


def test_the_python_api_runs_the_flow_with_the_params_shard_concurrency(workspace, built_runners):
    results = ragspan.evaluate("data", out="results/api")
    assert built_runners == [("ThreadPoolTaskRunner", SHARD_CONCURRENCY)]
    assert results.run == "baseline" and results.metrics["claims"] > 0


def test_the_watch_flow_runs_the_flow_with_the_params_shard_concurrency(workspace, built_runners):
    from ragspan.flows.watch import watch

    record = watch(index="demo", trigger="schedule", workspace=str(workspace))
    assert built_runners == [("ThreadPoolTaskRunner", SHARD_CONCURRENCY)]
    assert record["claims"] > 0 and (workspace / record["results"] / "metrics.json").is_file()


def test_choosing_a_run_from_python_names_the_keyword_not_the_flag(tmp_path, monkeypatch):
    data = tmp_path / "data"
    shutil.copytree(SAMPLE, data)
    shutil.copyfile(data / "runs" / "baseline.jsonl", data / "runs" / "second.jsonl")
    monkeypatch.chdir(tmp_path)  # no params.yaml here: the data directory's runs decide
    with pytest.raises(UsageError, match=r"choose one with run=: ") as raised:
        ragspan.evaluate(data)
    assert "--run" not in str(raised.value)
    assert main(["evaluate", "--data", str(data), "--quiet"]) == 2  # the command still says --run
