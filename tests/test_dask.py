"""The evaluate flow on Dask (`--task-runner dask`, prefect-dask) gives the same diagnoses
as the default thread runner. Both run as the user runs them: the `ragspan` CLI in a
subprocess, each with its own RAGSPAN_HOME.

- a temporary local cluster (no shared cache, no shared index);
- a separately started cluster: `dask scheduler` and two `dask worker` processes on
  127.0.0.1 (free ports, each in its own working directory, sharing the client's state
  dir through RAGSPAN_HOME), four shards spread over both workers; then a third worker
  that does not share the state dir stops the next run before any shard, naming it;
- verdicts reused on Dask: after a corpus change, a run on a temporary local cluster of two
  workers judges only the pairs whose text changed, as the thread runner does — the verdict
  cache reaches the judges in the workers as an argument (tasks.judges.base.JudgeRuntime)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import SAMPLE, labels_the_local_judge_gives
from servers import free_port, stop, wait_for

pytestmark = pytest.mark.e2e  # slow, end to end: `pytest -m "not e2e"` leaves it out

RAGSPAN = str(Path(sys.executable).parent / "ragspan")
KEY = ["question_id", "claim_id"]
COMPARED = ["claim", "label", "doc_id", "chunk_id", "char_start", "char_end", "span_text", "evidence_source",
            "source_conflict"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "RAGSPAN_"))}
    env["RAGSPAN_PREFECT_SERVER"] = "ephemeral"  # one run per state dir: no server left behind
    return env


def _evaluate(tmp: Path, name: str, runner: str, *extra: str, home: Path | None = None,
              data: Path = SAMPLE) -> subprocess.Popen:
    env = _env()
    env["RAGSPAN_HOME"] = str(home or tmp / f"home-{name}")
    cmd = [RAGSPAN, "evaluate", "--data", str(data), "--run", "baseline", "--out", str(tmp / name),
           "--quiet", "--task-runner", runner, *extra]
    return subprocess.Popen(cmd, env=env, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_dask_runner_gives_the_same_diagnoses_as_threads(tmp_path):
    # Both at once: each process mostly waits for its own temporary Prefect server.
    procs = {name: _evaluate(tmp_path, name, name) for name in ("thread", "dask")}
    for name, p in procs.items():
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, f"{name} runner failed:\n{err[-3000:]}"
    a = pd.read_parquet(tmp_path / "thread" / "diagnoses.parquet").sort_values(KEY).reset_index(drop=True)
    b = pd.read_parquet(tmp_path / "dask" / "diagnoses.parquet").sort_values(KEY).reset_index(drop=True)
    assert len(a) == len(b) > 0
    pd.testing.assert_frame_equal(a[KEY + COMPARED], b[KEY + COMPARED])
    expected = labels_the_local_judge_gives()
    merged = expected.merge(b, on=["question_id", "claim"], how="left", suffixes=("_expected", ""))
    assert (merged["label_expected"] == merged["label"]).all()


def _same_diagnoses(a_dir: Path, b_dir: Path) -> int:
    a = pd.read_parquet(a_dir / "diagnoses.parquet").sort_values(KEY).reset_index(drop=True)
    b = pd.read_parquet(b_dir / "diagnoses.parquet").sort_values(KEY).reset_index(drop=True)
    assert len(a) == len(b) > 0
    pd.testing.assert_frame_equal(a[KEY + COMPARED], b[KEY + COMPARED])
    return len(a)


def test_a_separate_dask_cluster_gives_the_same_diagnoses_and_checks_shared_state(tmp_path):
    from distributed import Client

    dask = str(Path(sys.executable).parent / "dask")
    address = f"tcp://127.0.0.1:{free_port()}"
    shared = tmp_path / "shared-state"  # the client's RAGSPAN_HOME; on several machines: shared storage
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"pipeline": {"shard_size": 10}}))  # 4 shards
    procs: list[subprocess.Popen] = []

    def start(name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
        (tmp_path / name).mkdir()
        log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(cmd, cwd=tmp_path / name, env=env, stdout=log, stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc

    def worker(name: str, env: dict[str, str]) -> subprocess.Popen:
        return start(name, [dask, "worker", address, "--nworkers", "1", "--nthreads", "1", "--no-dashboard",
                            "--host", "127.0.0.1", "--local-directory", str(tmp_path / name / "dask")], env)

    try:
        port = address.rsplit(":", 1)[1]
        start("scheduler", [dask, "scheduler", "--host", "127.0.0.1", "--port", port, "--no-dashboard"], _env())
        for name in ("worker-1", "worker-2"):
            worker(name, {**_env(), "RAGSPAN_HOME": str(shared)})
        with Client(address, timeout=60) as client:
            wait_for(lambda: len(client.scheduler_info()["workers"]) == 2, 90, "two Dask workers")
            runs = {"thread": _evaluate(tmp_path, "thread", "thread"),
                    "dask": _evaluate(tmp_path, "dask", "dask", "--dask-address", address, home=shared)}
            for name, p in runs.items():
                _, err = p.communicate(timeout=300)
                assert p.returncode == 0, f"{name} runner failed:\n{err[-3000:]}"
            assert _same_diagnoses(tmp_path / "thread", tmp_path / "dask") == 86
            executed = client.run(lambda dask_worker: dask_worker.state.executed_count)
            assert min(executed.values()) > 0 and sum(executed.values()) == 4, executed  # both workers ran shards

            # a worker with a state dir of its own: the next run stops before any shard
            worker("worker-3", _env())
            wait_for(lambda: len(client.scheduler_info()["workers"]) == 3, 90, "the third worker")
            third = (set(client.scheduler_info()["workers"]) - set(executed)).pop()
            bad = _evaluate(tmp_path, "dask-bad", "dask", "--dask-address", address, home=shared)
            _, err = bad.communicate(timeout=300)
        assert bad.returncode == 2, err[-3000:]
        assert "1 of 3 Dask workers cannot see this run's state" in err and third in err
        assert str(tmp_path / "worker-3" / ".ragspan") in err and f"RAGSPAN_HOME={shared}" in err
        assert not (tmp_path / "dask-bad").exists()
    finally:
        for proc in reversed(procs):  # workers first, then the scheduler; by PID
            stop(proc, timeout=30)


# ---------------------------------------------------------------- verdicts reused on Dask

SHOUTED = 8  # documents whose "the" becomes "THE"


def shout_the(data: Path, documents: int = SHOUTED) -> list[str]:
    """Every word "the" of the first `documents` documents holding one becomes "THE": the
    same length, so every chunk keeps its offsets and only those documents' passages change.
    Returns their ids."""
    path = data / "corpus.jsonl"
    docs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    changed = []
    for doc in docs:
        if len(changed) < documents and re.search(r"\bthe\b", doc["text"]):
            doc["text"] = re.sub(r"\bthe\b", "THE", doc["text"])
            changed.append(doc["doc_id"])
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    assert len(changed) == documents
    return changed


def _judge_facts(out: Path) -> dict:
    """run.json's judge counts: pairs judged, verdicts reused, reused pairs judged again,
    pairs decided without the model."""
    judge = json.loads((out / "run.json").read_text(encoding="utf-8"))["judge"]
    return {k: judge[k] for k in ("pairs_judged", "verdicts_reused", "marks_rejudged", "pairs_decided")}


def test_a_dask_run_after_a_corpus_change_judges_only_the_new_pairs_as_threads_do(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(SAMPLE, data)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"pipeline": {"shard_size": 6}}))  # several shards
    homes = {runner: tmp_path / f"home-{runner}" for runner in ("thread", "dask")}

    def both(step: str) -> dict[str, dict]:
        # dask: a temporary local cluster of pipeline.shard_concurrency (2) worker processes,
        # which see the run's state dir through the RAGSPAN_HOME they inherit
        procs = {r: _evaluate(tmp_path, f"{r}-{step}", r, home=homes[r], data=data) for r in homes}
        for runner, p in procs.items():
            _, err = p.communicate(timeout=420)
            assert p.returncode == 0, f"{runner} runner, {step} run, failed:\n{err[-3000:]}"
        return {r: _judge_facts(tmp_path / f"{r}-{step}") for r in homes}

    first = both("first")
    # a cold run judges every pair the model must see; the others are decided without it
    assert first["dask"] == first["thread"] and first["dask"]["pairs_judged"] > 200
    assert first["dask"]["pairs_judged"] + first["dask"]["pairs_decided"] > 500
    assert all((home / "verdict-cache.sqlite").is_file() for home in homes.values())
    shout_the(data)
    second = both("second")
    # only the pairs whose passage text changed are judged again, on Dask as on threads
    assert second["dask"] == second["thread"], second
    judged, reused = second["dask"]["pairs_judged"], second["dask"]["verdicts_reused"]
    assert 0 < judged < first["dask"]["pairs_judged"] / 2 and reused > judged, second
    _same_diagnoses(tmp_path / "thread-second", tmp_path / "dask-second")
