"""The manifest stamped on every output: what data, parameters, judge and code produced it.

Two reports with the same manifest have the same labels (the local judge is
deterministic; an LLM judge is made so by its content-hash cache).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from ragspan.tasks.config import OUTPUT_SCHEMA_VERSION, RAGSPAN_VERSION, Settings, code_version
from ragspan.tasks.judges.base import JudgeSpec


def git_state(where: Path) -> dict[str, object]:
    """The git revision of `where` and whether its tree is dirty (None outside git)."""
    def run(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=where, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    rev = run("rev-parse", "HEAD")
    dirty = run("status", "--porcelain", "--untracked-files=no")
    return {"git_rev": rev, "git_dirty": None if rev is None else bool(dirty)}


def manifest_for(run: str, data_dir: Path, input_files: dict[str, str], settings: Settings,
                 spec: JudgeSpec) -> dict:
    return {
        "run": run,
        "inputs_md5": dict(sorted(input_files.items())),
        "params": settings.model_dump(mode="json"),
        "params_hash": settings.fingerprint(),
        "judge": spec.as_dict(),
        "ragspan_version": RAGSPAN_VERSION,
        "code_version": code_version(),
        "output_schema": OUTPUT_SCHEMA_VERSION,
        **git_state(data_dir),
    }
