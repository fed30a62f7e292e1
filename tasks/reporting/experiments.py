"""A watch run recorded as a DVC experiment (`dvc exp save`), in a git + DVC workspace."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from ragspan.tasks.reporting.git import experiment_commits, git, is_work_tree


def is_dvc_workspace(root: Path) -> bool:
    """A DVC project inside a git work tree: where a watch run is saved as an experiment."""
    if not (root / ".dvc").is_dir() or shutil.which("git") is None:
        return False
    return is_work_tree(root)


def committable_targets(root: Path) -> tuple[list[str], list[str]]:
    """(stages and .dvc files whose outs all exist, those with an out missing).

    `dvc exp save` re-commits every stage's outs and fails on the first one missing, e.g.
    `results/baseline/claims.parquet` in a fresh clone where `dvc repro` has not run. A
    watch run changes only its own run file and results, so it commits what is there
    and leaves the other stages' lock entries as they are."""
    from dvc.repo import Repo

    ok, missing = [], []
    with Repo(str(root)) as repo:
        for stage in repo.index.stages:
            (ok if all(o.exists for o in stage.outs) else missing).append(stage.addressing)
    return ok, missing


def save_experiment(root: Path, name: str, paths: list[Path], message: str) -> dict:
    """`dvc exp save -n NAME [targets]`, including `paths` where git neither tracks nor
    ignores them; stages with a missing out are left out (listed under `skipped`)."""
    rel = [p.resolve().relative_to(root).as_posix() for p in paths if p.exists()]
    untracked = (git(root, "ls-files", "--others", "--exclude-standard", "--", *rel) or "").splitlines()
    targets, skipped = committable_targets(root)
    dvc = str(Path(sys.executable).parent / "dvc")
    cmd = [dvc if Path(dvc).exists() else "dvc", "exp", "save", "-f", "-n", name, "-m", message]
    for p in untracked:
        cmd += ["-I", p]
    if skipped:
        # No target means "every stage" to DVC; a directory holding no DVC file (-R)
        # means none: the experiment then records the included files alone.
        cmd += targets or ["-R", rel[-1] if rel else "results"]
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"dvc exp save failed ({done.returncode}): {(done.stderr or done.stdout).strip()[-800:]}")
    sha = git(root, "rev-parse", "--verify", "--quiet", f"refs/exps/{_exp_ref_dir(root)}/{name}")
    if sha is None:  # the ref layout is DVC's business: search for it
        sha = next(iter(experiment_commits(root, name)), None)
    return {"name": name, "sha": sha, "included": untracked, "skipped": skipped}


def _exp_ref_dir(root: Path) -> str:
    base = git(root, "rev-parse", "HEAD") or ""
    return f"{base[:2]}/{base[2:]}"
