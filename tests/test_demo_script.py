"""scripts/demo on a clone of the repository leaves `git status` clean.

The clone gets the already installed environment (`.venv` linked to this checkout's, so
the demo skips its install step; the install itself is scripts/install's, exercised by
CI). The demo evaluates the bundled sample for real (~15 s) into demo-results/, which git
ignores; results/ — the committed output of `dvc repro` — is not touched.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from conftest import REPO

pytestmark = pytest.mark.e2e  # slow, end to end: `pytest -m "not e2e"` leaves it out


def test_demo_leaves_git_status_clean(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    (clone / ".venv").symlink_to(REPO / ".venv", target_is_directory=True)
    tracked_metrics = (clone / "results" / "baseline" / "metrics.json").read_bytes()
    env = {**os.environ, "RAGSPAN_HOME": str(tmp_path / "state")}
    env.pop("PREFECT_API_URL", None)
    demo = subprocess.run(["bash", "scripts/demo", "--quiet"], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert (clone / "demo-results" / "baseline" / "metrics.json").is_file()
    status = subprocess.run(["git", "status", "--porcelain", "--ignored=no"], cwd=clone, capture_output=True,
                            text=True, check=True).stdout
    assert status.splitlines() == ["?? .venv"]  # the link this test made, nothing the demo wrote
    assert (clone / "results" / "baseline" / "metrics.json").read_bytes() == tracked_metrics
