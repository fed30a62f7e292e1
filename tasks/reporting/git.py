"""The one way ragspan asks git something: a read-only command, its output or None.

Used by the manifest (revision, dirty tree), `compare` (revisions and DVC experiment
names) and the watch flow (experiment refs, untracked outputs)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

TIMEOUT_S = 30


def git(repo: Path, *args: str, timeout: float = TIMEOUT_S) -> str | None:
    """`git ARGS` in `repo`: stripped stdout, or None when git is missing, times out or fails."""
    if shutil.which("git") is None:
        return None
    try:
        out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False,
                             timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_state(repo: Path) -> dict[str, object]:
    """{"git_rev", "git_dirty"}: the revision of `repo` and whether tracked files changed
    (both None outside git)."""
    rev = git(repo, "rev-parse", "HEAD")
    dirty = git(repo, "status", "--porcelain", "--untracked-files=no")
    return {"git_rev": rev, "git_dirty": None if rev is None else bool(dirty)}


def is_work_tree(repo: Path) -> bool:
    return git(repo, "rev-parse", "--is-inside-work-tree") == "true"


def experiment_commits(repo: Path, name: str) -> list[str]:
    """Commits of the DVC experiments called `name` (DVC keeps them under refs/exps/)."""
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/exps/") or ""
    return [line.split()[1] for line in refs.splitlines()
            if not line.startswith("refs/exps/exec/") and line.split()[0].rsplit("/", 1)[-1] == name]
