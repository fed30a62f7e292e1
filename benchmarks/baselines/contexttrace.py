"""ContextTrace 1.3 as a claim-verification baseline (benchmark-only, never a dependency).

ContextTrace is installed in its own venv, benchmarks/.venv-contexttrace, by
benchmarks/baselines/install-contexttrace; this module runs
benchmarks/baselines/contexttrace_verify.py with that venv's python over a whole batch
at once (one subprocess, one temporary JSONL file). See that script for the exact
ContextTrace call and how its per-sub-claim verdicts map to (supported, score).

    from benchmarks.baselines.contexttrace import available, run_contexttrace
    verdicts = run_contexttrace([{"id": "c1", "question": q, "claim": c, "passages": [...]}])
    supported, score = verdicts["c1"]
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent.parent
VENV = BENCHMARKS / ".venv-contexttrace"
SCRIPT = Path(__file__).resolve().parent / "contexttrace_verify.py"
INSTALL_HINT = "run benchmarks/baselines/install-contexttrace"


class ContextTraceNotInstalled(RuntimeError):
    """The ContextTrace venv (benchmarks/.venv-contexttrace) is missing."""


def venv_python() -> Path:
    return VENV / "bin" / "python"


def available() -> bool:
    """True when the ContextTrace venv's python exists (install-contexttrace has run)."""
    return venv_python().is_file() and os.access(venv_python(), os.X_OK)


def _child_env() -> dict[str, str]:
    # No CONTEXTTRACE_* setting (judge provider, model paths, ...) reaches the child, and
    # nothing of the project venv either: the run is offline and reproducible.
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    return {
        k: v for k, v in os.environ.items() if not k.startswith("CONTEXTTRACE_") and k not in drop
    }


def run_contexttrace(
    items: list[dict[str, Any]], *, mode: str = "lexical", timeout: float | None = None
) -> dict[str, tuple[bool, float | None]]:
    """Verify each {"id", "question", "claim", "passages"} item with ContextTrace.

    Returns {id: (supported, score)}: supported only when ContextTrace found every
    sub-claim it derived from the claim `supported`; score the smallest `best_score`
    (evidence overlap, 0-1) over those sub-claims, None when it derived none. `mode` is
    one of ContextTrace's offline modes: lexical (its default), semantic, local_ml.
    """
    if not available():
        raise ContextTraceNotInstalled(
            f"ContextTrace baseline not installed ({venv_python()} missing): {INSTALL_HINT}"
        )
    if not items:
        return {}
    ids = [str(item["id"]) for item in items]
    if len(set(ids)) != len(ids):
        raise ValueError("run_contexttrace: item ids must be unique")

    with tempfile.TemporaryDirectory(prefix="ragspan-contexttrace-") as tmp:
        src = Path(tmp) / "items.jsonl"
        with src.open("w", encoding="utf-8") as fh:
            for item in items:
                row = {
                    "id": str(item["id"]),
                    "question": item.get("question") or "",
                    "claim": item["claim"],
                    "passages": list(item.get("passages") or []),
                }
                fh.write(json.dumps(row) + "\n")
        # -I: isolated mode, so neither the project's sys.path nor PYTHON* settings leak in.
        proc = subprocess.run(
            [str(venv_python()), "-I", str(SCRIPT), str(src), "--mode", mode],
            check=False,
            capture_output=True,
            text=True,
            cwd=tmp,
            env=_child_env(),
            timeout=timeout,
        )
    if proc.returncode != 0:
        raise RuntimeError(
            f"contexttrace_verify.py exited {proc.returncode}:\n{proc.stderr.strip()[-4000:]}"
        )

    out: dict[str, tuple[bool, float | None]] = {}
    for line in proc.stdout.splitlines():
        if line.strip():
            row = json.loads(line)
            score = row["score"]
            out[str(row["id"])] = (bool(row["supported"]), None if score is None else float(score))
    missing = set(ids) - out.keys()
    if missing:
        raise RuntimeError(f"ContextTrace returned no verdict for {len(missing)} item(s)")
    return out
