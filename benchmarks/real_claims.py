"""How well a ragspan judge labels real, human-labelled claims, through the real pipeline.

    .venv/bin/python benchmarks/real_claims.py [--sets wice,factcheck,factcheck-pairs]
        [--limit N] [--judge local] [--fit MOD:FUNC] [--folds 5] [--seed 13]
        [--keep DIR] [--name NAME]

The sets (benchmarks/_real_claims.py, read from ../shared/data, never copied): WiCE dev
(Wikipedia claims against the page they cite) and Factcheck-GPT (claims from ChatGPT
answers against web snippets), at claim level and, for Factcheck-GPT, also per (claim,
snippet) pair. Each set becomes a temporary workspace — one document per passage, one
empty question and one answer (= the claim, bring-your-own `claims`) per case, every
passage retrieved whole and in context — and `ragspan evaluate` runs on it as a
subprocess with `search.top_k: 0`: the gold is about the given passages, so no
corpus-wide search may find support elsewhere.

Scored from diagnoses.parquet: predicted supported ⇔ label `correct`, gold supported ⇔
gold `supported`; balanced accuracy (headline, as in LLM-AggreFact), accuracy, recall and
precision of the label mapping (supported↔correct, partial↔synthesis_error,
unsupported↔hallucination), the confusion matrix, and — when the diagnoses carry
`support_probability` — a 10-bin reliability table, ECE and AUC; the `uncertain` share
when present; for WiCE, how often a correct verdict's deciding span overlaps a gold
supporting sentence.

Without --fit the packaged judge runs once over every case (nothing is tuned on them).
With --fit MOD:FUNC, cases are split into --folds folds grouped by claim; for each fold
FUNC(train_cases, workdir) -> model json path is fitted on the other folds and the
pipeline runs on the held-out fold with RAGSPAN_LOCAL_JUDGE_MODEL set to it; the
held-out predictions are pooled and scored together. Figures go to
benchmarks/results/real-claims-<name>.json (default name: the judge's version).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _real_claims import GOLDS, LOADERS, REPO, Case
from ragspan.tasks.core.taxonomy import SHORT
from ragspan.tasks.judges.local import local_support_threshold
from ragspan.tasks.reporting.results_files import read_results

VENV_BIN = Path(sys.executable).parent
RAGSPAN = VENV_BIN / "ragspan"
RUN = "claims"
PRED_LABELS = (
    "correct",
    "rank_failure",
    "retrieval_miss",
    "synthesis_error",
    "hallucination",
    "unjudged",
)
# The label ragspan should give each gold class when every passage is in context.
EXPECTED = {"supported": "correct", "partial": "synthesis_error", "unsupported": "hallucination"}
BINS = 10

Fit = Callable[[list[Case], Path], Path]


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


def assign_folds(cases: Sequence[Case], folds: int, seed: int) -> dict[str, int]:
    """group -> fold: sorted group ids shuffled with `seed`, dealt round-robin, so one
    claim's cases (Factcheck pairs) never sit on both sides of a split."""
    groups = sorted({c.group for c in cases})
    random.Random(seed).shuffle(groups)
    return {g: i % folds for i, g in enumerate(groups)}


@dataclass
class CvResult:
    rows: pd.DataFrame  # one row per case: gold, predicted label, probability, fold, ...
    judge: dict
    code: dict
    seconds: list[float]  # pipeline wall time per run
    fit_seconds: list[float]


def run_cv(
    cases: Sequence[Case],
    folds: int = 5,
    seed: int = 13,
    fit: Fit | None = None,
    workdir: Path | None = None,
    judge: str | None = None,
) -> CvResult:
    """Held-out predictions for every case. With `fit`, a model is fitted per fold on the
    other folds and judges only the held-out one; without it the packaged judge, tuned on
    none of these cases, runs once on everything (fold -1)."""
    workdir = workdir or Path(tempfile.mkdtemp(prefix="ragspan-real-claims-"))
    if fit is None:
        res = run_pipeline(cases, workdir / "all", judge)
        rows = case_rows(cases, res.diagnoses, -1)
        return CvResult(rows, res.judge, res.code, [res.seconds], [])
    fold_of = assign_folds(cases, folds, seed)
    parts, seconds, fit_seconds = [], [], []
    last: RunResult | None = None
    for k in range(folds):
        test = [c for c in cases if fold_of[c.group] == k]
        train = [c for c in cases if fold_of[c.group] != k]
        if not test:
            continue
        fold_dir = workdir / f"fold{k}"
        (fold_dir / "fit").mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        model = fit(train, fold_dir / "fit")
        fit_seconds.append(time.perf_counter() - t0)
        res = run_pipeline(test, fold_dir, judge, model)
        parts.append(case_rows(test, res.diagnoses, k))
        seconds.append(res.seconds)
        last = res
    if last is None:
        raise ValueError("no cases to evaluate")
    rows = pd.concat(parts, ignore_index=True)
    return CvResult(rows, last.judge, last.code, seconds, fit_seconds)


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


# ---------------------------------------------------------------- scoring


def _ratio(num: float, den: float) -> float | None:
    return round(num / den, 4) if den else None


def binary_scores(rows: pd.DataFrame) -> dict:
    """Supported vs not (predicted supported ⇔ `correct`; `unjudged` counts as not)."""
    gold = rows["gold"] == "supported"
    pred = rows["label"] == "correct"
    tpr = _ratio(int((gold & pred).sum()), int(gold.sum()))
    tnr = _ratio(int((~gold & ~pred).sum()), int((~gold).sum()))
    return {
        "balanced_accuracy": round((tpr + tnr) / 2, 4)
        if tpr is not None and tnr is not None
        else None,
        "accuracy": _ratio(int((gold == pred).sum()), len(rows)),
        "true_positive_rate": tpr,
        "true_negative_rate": tnr,
    }


def label_scores(rows: pd.DataFrame) -> dict:
    """Recall and precision of each gold class's expected label, the 3-way agreement and
    the confusion matrix gold × predicted label."""
    conf = pd.crosstab(rows["gold"], rows["label"]).reindex(
        index=list(GOLDS), columns=list(PRED_LABELS), fill_value=0
    )
    per = {}
    for g, lab in EXPECTED.items():
        hit = int(conf.loc[g, lab])
        per[g] = {
            "label": lab,
            "n": int(conf.loc[g].sum()),
            "recall": _ratio(hit, int(conf.loc[g].sum())),
            "precision": _ratio(hit, int(conf[lab].sum())),
        }
    agree = sum(int(conf.loc[g, lab]) for g, lab in EXPECTED.items())
    return {
        "label_accuracy": _ratio(agree, len(rows)),
        "per_gold": per,
        "confusion": {g: {p: int(conf.loc[g, p]) for p in PRED_LABELS} for g in GOLDS},
    }


def reliability(prob: pd.Series, outcome: pd.Series, bins: int = BINS) -> tuple[list[dict], float]:
    """Equal-width bins of the predicted probability: n, mean prediction, observed rate;
    and ECE = Σ n_b/N · |mean_b − observed_b|."""
    idx = (prob * bins).astype(int).clip(upper=bins - 1)
    table, ece, n = [], 0.0, len(prob)
    for b in range(bins):
        m = idx == b
        k = int(m.sum())
        row = {
            "bin": f"[{b / bins:.1f},{(b + 1) / bins:.1f}{']' if b == bins - 1 else ')'}",
            "n": k,
        }
        if k:
            mean_p, rate = float(prob[m].mean()), float(outcome[m].mean())
            row.update(mean_predicted=round(mean_p, 4), observed=round(rate, 4))
            ece += k / n * abs(mean_p - rate)
        table.append(row)
    return table, round(ece, 4)


def auc(prob: pd.Series, outcome: pd.Series) -> float | None:
    """Rank-based ROC AUC (Mann–Whitney U with average ranks for ties)."""
    pos = int(outcome.sum())
    neg = len(outcome) - pos
    if not pos or not neg:
        return None
    ranks = prob.rank(method="average")
    u = float(ranks[outcome].sum()) - pos * (pos + 1) / 2
    return round(u / (pos * neg), 4)


def calibration_scores(rows: pd.DataFrame) -> dict:
    """Reliability, ECE and AUC of the support probability, over the cases that have one
    (an unjudged claim has none); "n/a" before the pipeline writes a calibrated one."""
    if rows.empty or not bool(rows["calibrated"].iloc[0]):
        return {"calibration": "n/a: no support_probability in diagnoses.parquet"}
    have = rows[rows["prob"].notna()]
    prob = have["prob"].astype(float)
    outcome = have["gold"] == "supported"
    table, ece = reliability(prob, outcome)
    return {"calibration_n": len(have), "auc": auc(prob, outcome), "ece": ece, "reliability": table}


CASCADE_BANDS = (0.05, 0.1, 0.2)


def cascade_budget(rows: pd.DataFrame, threshold: float, bands: Sequence[float] = CASCADE_BANDS) -> list[dict]:
    """The cascade judge's budget curve, with the gold label standing in for a perfect
    LLM: for each routing rule, the share of claims sent to the LLM and the balanced
    accuracy when those claims get their gold label. Each case is one claim judged
    against its passages in one call, so its `support_probability` is exactly what the
    cascade routes on."""
    rows = rows[rows["calibrated"] & rows["prob"].notna()]
    if rows.empty:
        return []
    gold = rows["gold"] == "supported"
    local = rows["label"] == "correct"
    rules = [("none (local only)", None, pd.Series(False, index=rows.index))]
    rules += [(f"uncertain ±{b}", b, (rows["prob"] - threshold).abs() <= b) for b in bands]
    rules.append(("not_supported", None, ~local))
    out = []
    for name, band, routed in rules:
        pred = local.where(~routed, gold)
        tpr = _ratio(int((gold & pred).sum()), int(gold.sum()))
        tnr = _ratio(int((~gold & ~pred).sum()), int((~gold).sum()))
        out.append({"route": name, "band": band, "routed_share": round(float(routed.mean()), 4),
                    "balanced_accuracy": round((tpr + tnr) / 2, 4) if tpr is not None and tnr is not None else None})
    return out


def print_cascade(results: dict[str, dict]) -> None:
    for name, r in results.items():
        if not r.get("cascade"):
            continue
        print(f"\n== {name}: cascade budget (gold as a perfect LLM judge)")
        print(f"{'route':<20}{'routed':>8}{'bal.acc':>9}")
        for c in r["cascade"]:
            print(f"{c['route']:<20}{c['routed_share']:>8.3f}{_fmt(c['balanced_accuracy'], 9)}")


def score(rows: pd.DataFrame) -> dict:
    """Every figure for one set's pooled held-out predictions."""
    out: dict = {"n": len(rows), "gold": dict(Counter(rows["gold"]))}
    out.update(binary_scores(rows))
    out.update(label_scores(rows))
    out.update(calibration_scores(rows))
    # `uncertain` rests on the probability: without one it is False everywhere, not a figure.
    unc = rows["uncertain"].dropna() if bool(rows["calibrated"].any()) else rows.iloc[0:0]
    out["uncertain_share"] = _ratio(int(unc.astype(bool).sum()), len(unc)) if len(unc) else None
    hits = rows["span_hit"].dropna()
    out["span_overlap"] = _ratio(int(hits.astype(bool).sum()), len(hits)) if len(hits) else None
    out["span_overlap_n"] = len(hits)
    return out


# ---------------------------------------------------------------- output


def _fmt(v: float | None, width: int = 8) -> str:
    return f"{'n/a':>{width}}" if v is None else f"{v:>{width}.3f}"


def print_table(results: dict[str, dict]) -> None:
    print(
        f"\n{'set':<17}{'n':>6}{'bal.acc':>9}{'acc':>8}{'AUC':>8}{'ECE':>8}"
        f"{'uncert.':>8}{'span':>8}{'wall s':>8}"
    )
    for name, r in results.items():
        print(
            f"{name:<17}{r['n']:>6}{_fmt(r['balanced_accuracy'], 9)}{_fmt(r['accuracy'])}"
            f"{_fmt(r.get('auc'))}{_fmt(r.get('ece'))}{_fmt(r['uncertain_share'])}"
            f"{_fmt(r['span_overlap'])}{r['pipeline_seconds']:>8.1f}"
        )


def print_details(name: str, r: dict) -> None:
    short = SHORT
    print(
        f"\n== {name}: label accuracy {_fmt(r['label_accuracy'], 0)}; confusion (gold × predicted)"
    )
    print(
        f"{'':<12}" + "".join(f"{short[p]:>7}" for p in PRED_LABELS) + f"{'recall':>8}{'prec.':>8}"
    )
    for g in GOLDS:
        pg = r["per_gold"][g]
        print(
            f"{g:<12}"
            + "".join(f"{r['confusion'][g][p]:>7}" for p in PRED_LABELS)
            + f"{_fmt(pg['recall'])}{_fmt(pg['precision'])}"
        )
    if "reliability" not in r:
        print(f"reliability: {r['calibration']}")
        return
    print(
        f"reliability ({r['calibration_n']} with a probability; ECE {r['ece']:.3f}, AUC {_fmt(r['auc'], 0)})"
    )
    print(f"{'bin':<12}{'n':>6}{'mean p':>9}{'observed':>10}")
    for b in r["reliability"]:
        if b["n"]:
            print(f"{b['bin']:<12}{b['n']:>6}{b['mean_predicted']:>9.3f}{b['observed']:>10.3f}")


def git_state() -> dict:
    """The revision measured, and whether the package code (tasks/, flows/) differs from
    it: the pipeline runs in a temporary directory, so its manifest cannot tell."""

    def git(*a: str) -> str:
        proc = subprocess.run(
            ["git", "-C", str(REPO), *a], check=False, capture_output=True, text=True
        )
        return proc.stdout.strip()

    return {
        "git_rev": git("rev-parse", "HEAD") or None,
        "package_dirty": bool(git("status", "--porcelain", "--", "tasks", "flows")),
    }


def load_fit(spec: str) -> Fit:
    """`module:function` -> the function (the repo root is importable, so
    `benchmarks.judge_model.train:fit_for_cv` works)."""
    module, _, func = spec.partition(":")
    if not func:
        raise SystemExit(f"--fit expects MODULE:FUNCTION, got {spec!r}")
    sys.path.insert(0, str(REPO))
    return getattr(importlib.import_module(module), func)


def limited(cases: list[Case], limit: int | None, seed: int) -> list[Case]:
    """A seeded sample of whole groups (claims), stratified by nothing: a quick run."""
    groups = sorted({c.group for c in cases})
    if limit is None or limit >= len(groups):
        return cases
    keep = set(random.Random(seed).sample(groups, limit))
    return [c for c in cases if c.group in keep]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="wice,factcheck,factcheck-pairs")
    ap.add_argument("--limit", type=int, default=None, help="claims sampled per set (quick runs)")
    ap.add_argument("--judge", default=None, help="judge kind (default: params.yaml, i.e. local)")
    ap.add_argument("--fit", default=None, help="MODULE:FUNCTION fitting a judge model per fold")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--keep", default=None, help="keep workspaces and outputs in this directory")
    ap.add_argument("--name", default=None, help="results name (default: the judge's version)")
    args = ap.parse_args(argv)

    sets = [s for s in args.sets.split(",") if s]
    unknown = [s for s in sets if s not in LOADERS]
    if unknown:
        raise SystemExit(f"unknown sets {unknown}; choose from {sorted(LOADERS)}")
    fit = load_fit(args.fit) if args.fit else None
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="ragspan-real-claims-"))
    t_start = time.perf_counter()
    results: dict[str, dict] = {}
    judge: dict = {}
    code: dict = {}
    for name in sets:
        cases = limited(LOADERS[name](), args.limit, args.seed)
        print(
            f"{name}: {len(cases)} cases, gold {dict(Counter(c.gold for c in cases))}", flush=True
        )
        cv = run_cv(cases, args.folds, args.seed, fit, tmp / name, args.judge)
        judge, code = cv.judge, cv.code
        results[name] = {
            **score(cv.rows),
            "cascade": cascade_budget(cv.rows, local_support_threshold()),
            "pipeline_seconds": round(sum(cv.seconds), 2),
            "fit_seconds": round(sum(cv.fit_seconds), 2),
            "runs": len(cv.seconds),
        }
        cv.rows.to_csv(tmp / name / "rows.csv", index=False)
    print_table(results)
    for name, r in results.items():
        print_details(name, r)
    print_cascade(results)

    # A quick (--limit) run never overwrites the full run's figures.
    run_name = args.name or (
        judge.get("prompt_version", "unknown")
        + (f"-cv{args.folds}" if fit else "")
        + (f"-limit{args.limit}" if args.limit is not None else "")
    )
    out = REPO / "benchmarks" / "results" / f"real-claims-{run_name}.json"
    doc = {
        "name": run_name,
        "command": " ".join(
            ["benchmarks/real_claims.py", *(sys.argv[1:] if argv is None else argv)]
        ),
        "judge": judge,
        "code": {**code, **git_state()},
        "fit": args.fit,
        "folds": args.folds if fit else None,
        "seed": args.seed,
        "limit": args.limit,
        "total_seconds": round(time.perf_counter() - t_start, 2),
        "sets": results,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(f"\ntotal {doc['total_seconds']:.1f}s; figures written to {out}")
    if args.keep:
        print(f"workspaces, outputs and per-case rows (rows.csv) kept in {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
