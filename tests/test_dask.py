"""The evaluate flow on a local Dask cluster (`--task-runner dask`, prefect-dask) gives the
same diagnoses as the default thread runner. Both run as the user runs them: the `ragspan`
CLI in a subprocess, each with its own RAGSPAN_HOME (no shared cache, no shared index)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
from conftest import SAMPLE, labels_the_local_judge_gives

RAGSPAN = str(Path(sys.executable).parent / "ragspan")
KEY = ["question_id", "claim_id"]
COMPARED = ["claim", "label", "doc_id", "chunk_id", "char_start", "char_end", "span_text", "evidence_source",
            "source_conflict"]


def _evaluate(tmp: Path, name: str, runner: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "RAGSPAN_"))}
    env["RAGSPAN_HOME"] = str(tmp / f"home-{name}")
    env["RAGSPAN_PREFECT_SERVER"] = "ephemeral"  # one run per state dir: no server left behind
    cmd = [RAGSPAN, "evaluate", "--data", str(SAMPLE), "--run", "baseline", "--out", str(tmp / name),
           "--quiet", "--task-runner", runner]
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
