"""The held-out sets through the real pipeline: `ragspan evaluate` on a workspace built
from labelled cases, as a user would run it (benchmarks/lodo/run.py `--pipeline`).

Each set becomes a temporary workspace — one document per passage, one empty question and
one answer (= the claim, bring-your-own `claims`) per case, every passage retrieved whole
and in context — and `ragspan evaluate` runs on it as a subprocess with `search.top_k: 0`:
the gold is about the given passages, so no corpus-wide search may find support elsewhere.
The cases are training/readers/claims.py's (and training/readers/lodo_sets.py's). What this
module was before — benchmarks/real_claims.py, with its folds, scoring and report — is
history now (docs/local-judge.md); lodo's harness scores instead.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml
from ragspan.tasks.reporting.results_files import read_results

from training.readers.claims import REPO, Case

VENV_BIN = Path(sys.executable).parent
RAGSPAN = VENV_BIN / "ragspan"
RUN = "claims"


# ---------------------------------------------------------------- workspace


def doc_id(case_set: str, text: str) -> str:
    """A passage's document id: by content, so identical snippets are one document."""
    return f"{case_set}:{hashlib.sha1(text.encode('utf-8')).hexdigest()[:16]}"


def _write_jsonl(path: Path, records: Sequence[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def write_workspace(cases: Sequence[Case], root: Path) -> Path:
    """corpus.jsonl, questions.jsonl and runs/claims.jsonl for `cases` under root: each
    passage is its own document, retrieved whole, every one in the context window."""
    docs: dict[str, dict] = {}
    run = []
    for c in cases:
        retrieved = []
        for text in c.passages:
            d = doc_id(c.set, text)
            docs.setdefault(d, {"doc_id": d, "text": text, "set": c.set})
            retrieved.append({"doc_id": d, "char_start": 0, "char_end": len(text)})
        run.append(
            {
                "question_id": c.case_id,
                "answer": c.claim,
                "claims": [c.claim],  # bring-your-own: the claim is judged as written
                "context_k": len(retrieved),
                "retrieved": retrieved,
            }
        )
    (root / "runs").mkdir(parents=True, exist_ok=True)
    _write_jsonl(root / "corpus.jsonl", list(docs.values()))
    _write_jsonl(
        root / "questions.jsonl",
        [{"question_id": c.case_id, "question": c.question} for c in cases],
    )
    _write_jsonl(root / "runs" / f"{RUN}.jsonl", run)
    return root


def write_params(path: Path) -> Path:
    """The repo's params.yaml with no corpus-wide search: the gold says whether the given
    passages support the claim, so support found elsewhere would be scored as an error."""
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params.setdefault("search", {})["top_k"] = 0
    path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return path


# ---------------------------------------------------------------- running


@dataclass
class RunResult:
    diagnoses: pd.DataFrame
    judge: dict  # metrics.json manifest.judge
    code: dict  # metrics.json manifest: ragspan and code versions
    seconds: float


def _env(home: Path, model_path: Path | None) -> dict[str, str]:
    """A clean environment: no inherited Prefect/ragspan state, a fresh state dir (no
    judge cache, no answer store), so every verdict is computed by this run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "RAGSPAN_"))}
    env.update(
        RAGSPAN_HOME=str(home),
        PREFECT_HOME=str(home / "prefect"),
        DVC_NO_ANALYTICS="1",
        # One evaluation per fresh state dir: a local server would only be left idling.
        RAGSPAN_PREFECT_SERVER="ephemeral",
    )
    if model_path is not None:
        env["RAGSPAN_LOCAL_JUDGE_MODEL"] = str(model_path)
    return env


def run_pipeline(
    cases: Sequence[Case],
    workdir: Path,
    judge: str | None = None,
    model_path: Path | None = None,
) -> RunResult:
    """`ragspan evaluate` on a workspace built from `cases`, as a user would run it."""
    data = write_workspace(cases, workdir / "data")
    params = write_params(workdir / "params.yaml")
    out = workdir / "out"
    (workdir / "home" / "prefect").mkdir(parents=True, exist_ok=True)
    cmd = [str(RAGSPAN), "evaluate", "--data", str(data), "--run", RUN, "--out", str(out)]
    cmd += ["--quiet", "--params", str(params)] + (["--judge", judge] if judge else [])
    t0 = time.perf_counter()
    env = _env(workdir / "home", model_path)
    proc = subprocess.run(cmd, check=False, cwd=workdir, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    manifest = read_results(out)["manifest"]
    code = {k: manifest.get(k) for k in ("ragspan_version", "code_version")}
    return RunResult(pd.read_parquet(out / "diagnoses.parquet"), manifest["judge"], code, seconds)


def case_rows(cases: Sequence[Case], diag: pd.DataFrame, fold: int) -> pd.DataFrame:
    """Join each case with its claim's diagnosis (one claim per case). The probability is
    the calibrated `support_probability` when the pipeline writes it; before that, only a
    `correct` label's confidence exists, which is not a probability of support
    (`calibrated` False: no calibration figures are computed from it)."""
    by_q = {r["question_id"]: r for r in diag.to_dict("records")}
    # The column can exist before any judge fills it (then every value is null).
    calibrated = "support_probability" in diag.columns and bool(
        diag["support_probability"].notna().any()
    )
    rows = []
    for c in cases:
        d = by_q.get(c.case_id)
        if d is None:
            raise RuntimeError(f"no diagnosis for case {c.case_id}")
        if calibrated:
            prob = d["support_probability"]
        else:
            prob = d["confidence"] if d["label"] == "correct" else math.nan
        rows.append(
            {
                "set": c.set,
                "level": c.level,
                "case_id": c.case_id,
                "group": c.group,
                "fold": fold,
                "gold": c.gold,
                "label": d["label"],
                "prob": float(prob) if pd.notna(prob) else math.nan,
                "calibrated": calibrated,
                "uncertain": bool(d["uncertain"]) if "uncertain" in d else None,
                "span_hit": span_hit(c, d),
                "reason": d["reason"],
            }
        )
    return pd.DataFrame(rows)


def span_hit(case: Case, d: dict) -> bool | None:
    """WiCE: does the deciding span of a correct verdict on a gold-supported claim overlap
    a gold supporting sentence? None where the question does not apply."""
    if not case.gold_spans or case.gold != "supported" or d["label"] != "correct":
        return None
    if d["doc_id"] != doc_id(case.set, case.passages[0]) or pd.isna(d["char_start"]):
        return False
    s, e = int(d["char_start"]), int(d["char_end"])
    return any(s < ge and gs < e for gs, ge in case.gold_spans)
