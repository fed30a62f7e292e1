"""ragspan as users install it: requirements.lock pins versions pyproject's ranges allow
(and is what scripts/install put in this venv), and the built wheel — installed, not
editable, into a fresh venv — evaluates a copy of the sample from outside the repository.

The fresh venv gets only the wheel; its dependencies are this venv's, made visible by a
.pth file added after the install (a full `pip install -c requirements.lock` of ~200
packages takes ~2.5 min here; scripts/check-oldest does such an install against the
oldest allowed versions). So this tests the wheel's contents, its entry point and its
metadata (`pip check`), not the download."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from importlib.metadata import version
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, SAMPLE, labels_the_local_judge_gives
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from servers import clean_env

# What the wheel is built from: the files pyproject.toml packages, nothing else of the repository.
WHEEL_SOURCES = ("pyproject.toml", "README.md", "flows", "tasks")


def requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [Requirement(r) for r in [*project["dependencies"], *project["optional-dependencies"]["dev"]]]


def locked() -> dict[str, str]:
    pins = {}
    for line in (REPO / "requirements.lock").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, pinned = line.partition("==")
            assert pinned, f"requirements.lock: not a pin: {line!r}"
            pins[canonicalize_name(name)] = pinned.strip()
    return pins


def test_the_lock_pins_every_requirement_within_its_range():
    pins = locked()
    for req in requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"requirements.lock has no pin for {req.name}"
        assert req.specifier.contains(pins[name], prereleases=True), f"{req.name}=={pins[name]} outside {req}"


def test_this_venv_holds_the_locked_versions():
    differ = {name: (pinned, version(name)) for name, pinned in locked().items() if version(name) != pinned}
    assert not differ, f"installed versions differ from requirements.lock (run scripts/install): {differ}"


def run(*cmd: str | Path, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, check=False, **kw)
    assert done.returncode == 0, f"{cmd}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.mark.e2e
def test_the_wheel_installed_in_a_fresh_venv_evaluates_the_sample_from_elsewhere(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in WHEEL_SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(REPO / name, src / name)
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp_path / "dist", src)
    wheel = next((tmp_path / "dist").glob("ragspan-*.whl"))

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    py = venv / "bin" / "python"
    run(py, "-m", "pip", "install", "-q", "--no-index", "--no-deps", wheel)
    site = Path(run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (site / "ragspan_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    run(py, "-m", "pip", "check")  # the wheel's requirements hold for the locked versions

    work = tmp_path / "elsewhere"
    shutil.copytree(SAMPLE, work / "sample")
    env = {**clean_env(tmp_path), "RAGSPAN_HOME": str(tmp_path / "state"), "RAGSPAN_PREFECT_SERVER": "ephemeral",
           "PATH": f"{venv / 'bin'}:/usr/bin:/bin"}
    shown = json.loads(run(py, "-c", (
        "import json, ragspan, ragspan.tasks, ragspan.flows.cli, importlib.resources as r; "
        "pkg = lambda p: [str(f) for f in r.files(p).iterdir() if f.suffix in ('.md', '.json', '.html', '.typed')]; "
        "print(json.dumps({'where': [ragspan.__file__, *ragspan.tasks.__path__, ragspan.flows.cli.__file__], "
        "'data': pkg('ragspan') + pkg('ragspan.tasks.judges.prompts') + pkg('ragspan.tasks.judges.verifier') "
        "+ pkg('ragspan.tasks.reporting')}))"), cwd=work, env=env).stdout)
    assert all(p.startswith(str(site)) for p in shown["where"]), shown["where"]  # the wheel, not the repo
    names = {Path(p).name for p in shown["data"]}
    assert {"py.typed", "decompose.md", "extract.md", "local-5.json", "dvc_plots.html"} <= names, names

    run(venv / "bin" / "ragspan", "evaluate", "--data", "sample", "--run", "baseline", "--out", "out", "--quiet",
        cwd=work, env=env)
    assert (work / "out" / "report.html").is_file() and not (work / "results").exists()
    diagnoses = pd.read_parquet(work / "out" / "diagnoses.parquet")
    expected = labels_the_local_judge_gives()
    assert diagnoses["label"].value_counts().to_dict() == expected["label"].value_counts().to_dict()
