"""Test-wide setup: an isolated ragspan/Prefect/DVC state dir, and one Prefect test
server for the whole session (docs/stack.md: startup costs seconds, pay it once)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

_STATE = Path(tempfile.mkdtemp(prefix="ragspan-test-state-"))
os.environ.setdefault("RAGSPAN_HOME", str(_STATE))
os.environ["PREFECT_HOME"] = str(_STATE / "prefect")
os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"] = str(_STATE / "prefect" / "results")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "CRITICAL")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.pop("PREFECT_API_URL", None)
# Subprocesses (`ragspan evaluate`, `dvc repro`) keep Prefect's temporary server instead of
# starting a long-lived local one per test state dir; tests of the local server set "auto".
os.environ.setdefault("RAGSPAN_PREFECT_SERVER", "ephemeral")

# How the property tests search (docs/ci.md, "ragspan's own tests"): `ci`, the default, is
# derandomised — the same examples on every run, so a change lands or fails on its own
# merit, not on the draw; `explore` (scripts/explore-properties) searches at random and ten
# times longer, and what it finds becomes an @example in the test.
settings.register_profile("ci", max_examples=300, deadline=None, derandomize=True, database=None)
settings.register_profile("explore", max_examples=3000, deadline=None, derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("RAGSPAN_HYPOTHESIS_PROFILE", "ci"))

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`live` tests (a real model, scripts/live-model-test) run only when -m names them.
    Done here, not by `-m 'not live'` in addopts: a -m given on the command line
    (`pytest -m "not e2e"`, the quick part) replaces addopts' and would bring them in."""
    if "live" in (config.option.markexpr or ""):
        return
    live = [item for item in items if item.get_closest_marker("live")]
    if live:
        config.hook.pytest_deselected(items=live)
        items[:] = [item for item in items if not item.get_closest_marker("live")]


@pytest.fixture(scope="session")
def prefect_server():
    """A real (temporary, SQLite-backed) Prefect server for flow tests."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        yield


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    """A fresh ragspan state dir (judge cache, index, Prefect results) for one test.

    Prefect reads its settings once, so the result store moves via temporary_settings."""
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH, temporary_settings

    d = tmp_path / "state"
    monkeypatch.setenv("RAGSPAN_HOME", str(d))
    with temporary_settings({PREFECT_RESULTS_LOCAL_STORAGE_PATH: str(d / "prefect-results")}):
        yield d


def labels_the_local_judge_gives():
    """expected_labels.csv with the local judge's known mistakes on the sample applied
    (data/sample/known_judge_errors.csv): what a run of the sample must produce."""
    import pandas as pd

    expected = pd.read_csv(SAMPLE / "expected_labels.csv")
    known = pd.read_csv(SAMPLE / "known_judge_errors.csv").set_index(["question_id", "claim"])
    keys = list(zip(expected["question_id"], expected["claim"]))
    expected["label"] = [known.loc[k, "judged_label"] if k in known.index else v
                         for k, v in zip(keys, expected["label"])]
    expected["source_conflict"] = [bool(known.loc[k, "judged_source_conflict"]) if k in known.index else v
                                   for k, v in zip(keys, expected["source_conflict"])]
    return expected
