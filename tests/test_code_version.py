"""Guarantee: only code that can change a label, a span or a verdict is in the cache keys.

Editing reporting (or any I/O, tool, flow or CLI) code keeps every cached step and stored
answer; editing a step or a judge invalidates both. Shown on a temporary copy of the
package, run for real through the CLI (PYTHONPATH puts the copy ahead of the install)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO, SAMPLE
from ragspan.tasks.config import EVALUATION_CODE, source_hash


def _copy_package(dest: Path) -> Path:
    root = dest / "ragspan"
    for part in ("tasks", "flows"):
        shutil.copytree(REPO / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _touch(path: Path) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "\n# edited by test_code_version\n", encoding="utf-8")


def test_code_version_hashes_only_label_deciding_code(tmp_path):
    root = _copy_package(tmp_path) / "tasks"
    before = source_hash(EVALUATION_CODE, root)
    for harmless in ("reporting/html.py", "reporting/compare.py", "tools/demo_rag.py", "io/outputs.py", "errors.py"):
        _touch(root / harmless)
        assert source_hash(EVALUATION_CODE, root) == before, harmless
    for deciding in ("steps/diagnose.py", "judges/local.py", "core/text.py", "core/taxonomy.py",
                     "judges/prompts/extract.md"):
        _touch(root / deciding)
        after = source_hash(EVALUATION_CODE, root)
        assert after != before, deciding
        before = after


def _evaluate(pkg_parent: Path, state: Path, out: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(pkg_parent), "RAGSPAN_HOME": str(state)}
    env.pop("PREFECT_API_URL", None)
    env["PREFECT_RESULTS_LOCAL_STORAGE_PATH"] = str(state / "prefect-results")
    proc = subprocess.run([sys.executable, "-m", "ragspan.flows.cli", "evaluate", "--data", str(SAMPLE),
                           "--run", "baseline", "--out", str(out), "--progress", "none"],
                          cwd=tmp_cwd(pkg_parent), env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def tmp_cwd(pkg_parent: Path) -> Path:
    cwd = pkg_parent / "cwd"  # no params.yaml here: built-in defaults, like a fresh checkout's
    cwd.mkdir(exist_ok=True)
    return cwd


def _reused(stdout: str) -> tuple[int, int]:
    m = re.search(r"answers reused from the answer store: (\d+) of (\d+)", stdout)
    assert m, stdout
    return int(m.group(1)), int(m.group(2))


def test_editing_reporting_keeps_caches_editing_a_step_does_not(tmp_path):
    root = _copy_package(tmp_path)
    state = tmp_path / "state"
    first = _evaluate(tmp_path, state, tmp_path / "out1")
    assert _reused(first)[0] == 0 and "tasks: none ran" not in first

    _touch(root / "tasks" / "reporting" / "html.py")  # report code: evaluations stay valid
    second = _evaluate(tmp_path, state, tmp_path / "out2")
    reused, total = _reused(second)
    assert reused == total > 0
    assert "tasks: none ran" in second and "judge calls: 0" in second

    _touch(root / "tasks" / "steps" / "diagnose.py")  # a step: every answer is evaluated again
    third = _evaluate(tmp_path, state, tmp_path / "out3")
    assert _reused(third)[0] == 0
    assert "diagnose 1 Completed" in third and "judge calls: 0" not in third
