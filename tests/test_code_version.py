"""Guarantee: a cache key covers the code that shapes its value, found from the imports.

Editing reporting (or the CLI, a tool, the input loader, the state room, progress printing)
code keeps every cached step and stored answer;
editing a step, a judge or the shard's chain in flows/ invalidates both; editing the flow
that writes the results recomputes the report of an unchanged re-run. Shown on a temporary
copy of the package, run for real through the CLI (PYTHONPATH puts the copy ahead of the
install)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO, SAMPLE
from ragspan.tasks.config import EVALUATION_ROOTS, RESULTS_ROOTS, source_hash


def _copy_package(dest: Path) -> Path:
    root = dest / "ragspan"
    for part in ("tasks", "flows"):
        shutil.copytree(REPO / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _touch(path: Path) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "\n# edited by test_code_version\n", encoding="utf-8")


def _parts(root: Path) -> tuple[tuple[str, Path], ...]:
    return (("ragspan.tasks", root / "tasks"), ("ragspan.flows", root / "flows"))


def _assert_each_edit_moves(root: Path, roots: tuple[str, ...], files: tuple[str, ...]) -> None:
    """Editing each of `files` in turn gives `roots` a new hash every time."""
    before = source_hash(roots, _parts(root))
    for name in files:
        _touch(root / name)
        after = source_hash(roots, _parts(root))
        assert after != before, name
        before = after


def test_code_version_hashes_the_code_the_shard_chain_imports(tmp_path):
    root = _copy_package(tmp_path)
    parts = _parts(root)
    before = source_hash(EVALUATION_ROOTS, parts)
    for harmless in ("tasks/reporting/html.py", "tasks/reporting/compare.py", "tasks/tools/demo_rag.py",
                     "flows/cli/explain.py", "flows/evaluate.py", "flows/progress.py", "tasks/inputs/load/files.py",
                     "tasks/inputs/load/workspace.py", "tasks/inputs/validated_cache.py", "tasks/state/_store.py",
                     "tasks/state/_heal.py", "tasks/state/_mapped.py", "tasks/state/_workers.py", "tasks/config.py",
                     "tasks/errors.py", "tasks/supervision/runtime.py"):
        _touch(root / harmless)
        assert source_hash(EVALUATION_ROOTS, parts) == before, harmless
    _assert_each_edit_moves(root, EVALUATION_ROOTS, (
        "tasks/steps/diagnose.py", "tasks/judges/local.py", "tasks/core/text.py", "tasks/core/taxonomy.py",
        "tasks/judges/prompts/extract.md", "tasks/judges/verifier/local-5.json", "flows/shard.py",
        "flows/ledger.py", "tasks/steps/shard_tables.py", "tasks/core/judging.py"))


def test_a_module_enters_the_key_when_a_step_imports_it(tmp_path):
    """No list kept by hand: the moment a step imports a module, that module keys its results."""
    root = _copy_package(tmp_path)
    parts = _parts(root)
    html = root / "tasks" / "reporting" / "html.py"
    before = source_hash(EVALUATION_ROOTS, parts)
    _touch(html)
    assert source_hash(EVALUATION_ROOTS, parts) == before
    step = root / "tasks" / "steps" / "diagnose.py"
    step.write_text(step.read_text(encoding="utf-8").replace(
        "from __future__ import annotations\n",
        "from __future__ import annotations\n\nimport ragspan.tasks.reporting.html  # noqa: F401\n", 1),
        encoding="utf-8")
    with_import = source_hash(EVALUATION_ROOTS, parts)
    _touch(html)
    assert source_hash(EVALUATION_ROOTS, parts) != with_import


def test_results_key_covers_the_flow_and_reporting(tmp_path):
    _assert_each_edit_moves(_copy_package(tmp_path), RESULTS_ROOTS, (
        "flows/evaluate.py", "tasks/reporting/html.py", "tasks/reporting/manifest.py", "tasks/reuse/answer_store.py",
        "flows/shard.py"))


def _evaluate(pkg_parent: Path, state: Path, out: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(pkg_parent), "RAGSPAN_HOME": str(state),
           "RAGSPAN_TIMINGS": str(out) + ".timings"}
    env.pop("PREFECT_API_URL", None)
    env["PREFECT_RESULTS_LOCAL_STORAGE_PATH"] = str(state / "prefect-results")
    proc = subprocess.run([sys.executable, "-m", "ragspan.flows.cli", "evaluate", "--data", str(SAMPLE),
                           "--run", "baseline", "--out", str(out), "--progress", "none"],
                          cwd=tmp_cwd(pkg_parent), env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _steps(out: Path) -> set[str]:
    """The steps that ran (RAGSPAN_TIMINGS: one JSON line each)."""
    lines = Path(str(out) + ".timings").read_text(encoding="utf-8").splitlines()
    return {json.loads(line)["step"] for line in lines}


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
    # the input loader and the state room compute no step's table: every step cache still hits
    _touch(root / "tasks" / "inputs" / "load" / "files.py")
    _touch(root / "tasks" / "state" / "_store.py")
    second = _evaluate(tmp_path, state, tmp_path / "out2")
    reused, total = _reused(second)
    assert reused == total > 0
    assert "tasks: none ran" in second and "judge calls: 0" in second

    _evaluate(tmp_path, state, tmp_path / "out2b")  # nothing changed: the kept results
    assert "report-unchanged" in _steps(tmp_path / "out2b")

    # the flow that assembles and writes the tables: the answers stay valid, the results are
    # computed again (not the kept ones, which older code wrote)
    evaluate_py = root / "flows" / "evaluate.py"
    evaluate_py.write_text(evaluate_py.read_text(encoding="utf-8").replace(
        "            metrics = timed(report, ", "            metrics = timed(report,  ", 1), encoding="utf-8")
    shaped = _evaluate(tmp_path, state, tmp_path / "out2c")
    assert _reused(shaped)[0] == _reused(shaped)[1] > 0
    assert "report" in _steps(tmp_path / "out2c") and "report-unchanged" not in _steps(tmp_path / "out2c")

    # a table-shaping line of the shard's chain: every answer is evaluated again
    tables = root / "tasks" / "steps" / "shard_tables.py"
    shaping = "both = pd.concat([judged, searched, *more], ignore_index=True)"
    assert shaping in tables.read_text(encoding="utf-8")
    tables.write_text(tables.read_text(encoding="utf-8").replace(
        shaping, shaping[:-1] + ", sort=False)", 1), encoding="utf-8")
    chained = _evaluate(tmp_path, state, tmp_path / "out2d")
    assert _reused(chained)[0] == 0

    _touch(root / "tasks" / "steps" / "diagnose.py")  # a step: every answer is evaluated again
    third = _evaluate(tmp_path, state, tmp_path / "out3")
    assert _reused(third)[0] == 0
    assert "diagnose 1 Completed" in third and "judge calls: 0" not in third
