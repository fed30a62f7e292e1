"""RAGTruth dev through `ragspan evaluate`: flagged answer characters vs the marked ones.

    .venv/bin/python -m benchmarks.ragtruth [--sets qa_dev,data2txt] [--split] [--limit N]
        [--json PATH] [--keep DIR] [--judge local]

Per set (benchmarks/ragtruth/data.py builds its data directory in a temporary folder),
`ragspan evaluate --data data --run ragtruth` runs as a user types it — in that folder
(no params.yaml: the built-in defaults), the local judge unless `--judge` says otherwise —
with a fresh state dir (`RAGSPAN_HOME`; Prefect's per-process server, so no server is left
running). It reads `results/ragtruth/answer_spans.parquet` and `diagnoses.parquet` and
prints, per set and per generating model, for each method:

- `judge`: an answer is flagged when answer_spans.parquet holds any `unsupported` or
  `contradicted` character of it, whatever its claim's label;
- `judge-certain`: the same, counting only the spans of claims labelled failing (not
  `correct`) and not `uncertain` — what the verdicts alone would flag;
- `lexical` and `rule`: the two baselines of issue 41 (benchmarks/ragtruth/metrics.py),
  on the same answers and passages.

Columns: answers, hallucinated (gold: any label), per answer balanced accuracy, F1 of the
hallucinated class and the share of clean answers flagged; per character P / R / F1 of
flagged vs marked non-space characters, summed over the group (micro); the share of the
judge's claims that are `uncertain` (of judged claims); `contradicted` characters against
the characters of RAGTruth's "Conflict" labels, P / R / F1.

`--split` also prints each half of a deterministic split by question (source id hash,
data.half): choose rules and thresholds on `tune`, report on `report`. Under the tables,
per set, where the judge's flagged characters come from: per claim label (and uncertain),
the claims, the flagged characters and their precision against the marked ones.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import pandas as pd

from benchmarks.ragtruth import data as D
from benchmarks.ragtruth import metrics as M

RAGSPAN = Path(sys.executable).parent / "ragspan"
METHODS = ("judge", "judge-certain", "lexical", "rule")
HALVES = ("all", "tune", "report")


# ---------------------------------------------------------------- running ragspan


def evaluate(answers: list[D.Answer], workdir: Path, judge: str = "local",
             model: Path | None = None) -> tuple[Path, float]:
    """Write the data directory under workdir and run `ragspan evaluate` there, as typed.
    `model`: a local judge model file (RAGSPAN_LOCAL_JUDGE_MODEL) instead of the packaged
    one. Returns the results directory and the command's wall seconds."""
    D.write_data_dir(answers, workdir / "data")
    home = workdir / "state"
    (home / "prefect").mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        RAGSPAN_HOME=str(home),
        PREFECT_HOME=str(home / "prefect"),
        RAGSPAN_PREFECT_SERVER="ephemeral",  # no server left running after the benchmark
        DVC_NO_ANALYTICS="1",
    )
    if model is not None:
        env["RAGSPAN_LOCAL_JUDGE_MODEL"] = str(model)
    cmd = [str(RAGSPAN), "evaluate", "--data", "data", "--run", D.RUN]
    if judge != "local":
        cmd += ["--judge", judge]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, check=False, cwd=workdir, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return workdir / "results" / D.RUN, seconds


def read_results(out: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    spans = pd.read_parquet(out / "answer_spans.parquet")
    diag = pd.read_parquet(out / "diagnoses.parquet")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    return spans, diag, manifest


# ---------------------------------------------------------------- scoring


def predictions(answers: list[D.Answer], spans: pd.DataFrame, diag: pd.DataFrame) -> dict[str, dict]:
    """Per method, question_id → (flagged spans, contradicted spans)."""
    status = {r.claim_id: (r.label, bool(r.uncertain)) for r in diag.itertuples()}
    text = {a.question_id: a.response for a in answers}
    judge: dict[str, list] = defaultdict(list)
    certain: dict[str, list] = defaultdict(list)
    contra: dict[str, list] = defaultdict(list)
    contra_certain: dict[str, list] = defaultdict(list)
    for r in spans.itertuples():
        sp = (int(r.answer_start), int(r.answer_end))
        if text[r.question_id][sp[0] : sp[1]] != r.text:  # docs/answer-spans.md: always equal
            raise AssertionError(f"answer span {r.claim_id} {sp} is not its text {r.text!r}")
        label, unc = status[r.claim_id]
        sure = label != "correct" and not unc
        judge[r.question_id].append(sp)
        if sure:
            certain[r.question_id].append(sp)
        if r.kind == "contradicted":
            contra[r.question_id].append(sp)
            if sure:
                contra_certain[r.question_id].append(sp)
    out: dict[str, dict] = {m: {} for m in METHODS}
    for a in answers:
        q = a.question_id
        out["judge"][q] = (judge.get(q, []), contra.get(q, []))
        out["judge-certain"][q] = (certain.get(q, []), contra_certain.get(q, []))
        out["lexical"][q] = (M.lexical_spans(a.response, a.passages), None)
        out["rule"][q] = (M.rule_spans(a.response, a.passages), None)
    return out


def _gold(a: D.Answer, conflict_only: bool = False) -> list[M.Span]:
    return [(lab["start"], lab["end"]) for lab in a.labels
            if not conflict_only or "Conflict" in lab["label_type"]]


def score_group(answers: list[D.Answer], pred: dict[str, tuple], diag: pd.DataFrame | None) -> dict:
    flags, gold = [], []
    chars, conflict = M.CharCounts(), M.CharCounts()
    has_conflict = False
    for a in answers:
        flagged, contra = pred[a.question_id]
        flags.append(M.any_char(a.response, flagged))
        gold.append(a.hallucinated)
        chars.add(a.response, flagged, _gold(a))
        if contra is not None:
            has_conflict = True
            conflict.add(a.response, contra, _gold(a, conflict_only=True))
    out = {"answer": M.answer_scores(flags, gold), "char": chars.scores()}
    if has_conflict:
        c = conflict.scores()
        out["conflict"] = {k: c[k] for k in ("precision", "recall", "f1", "tp", "fp", "fn")}
    if diag is not None:
        qids = {a.question_id for a in answers}
        d = diag[diag["question_id"].isin(qids) & (diag["label"] != "unjudged")]
        out["claims"] = len(d)
        out["uncertain_share"] = float(d["uncertain"].mean()) if len(d) else None
    return out


def score_set(answers: list[D.Answer], preds: dict[str, dict], diag: pd.DataFrame,
              halves: tuple[str, ...]) -> dict:
    """figures[half][model or "all"][method]."""
    models = sorted({a.model for a in answers})
    figures: dict[str, dict] = {}
    for h in halves:
        in_half = [a for a in answers if h == "all" or D.half(a.source_id) == h]
        figures[h] = {}
        for model in ("all", *models):
            group = [a for a in in_half if model == "all" or a.model == model]
            if not group:
                continue
            figures[h][model] = {
                m: score_group(group, preds[m], diag if m.startswith("judge") else None)
                for m in METHODS
            }
    return figures


def diagnostics(answers: list[D.Answer], spans: pd.DataFrame, diag: pd.DataFrame) -> dict:
    """Where the judge's flagged characters come from: per claim label (uncertain apart),
    its claims, the flagged non-space characters of its spans and their precision against
    the marked characters; the labels' shares; flagged characters on clean answers."""
    by_q = {a.question_id: a for a in answers}
    status = {r.claim_id: (r.label + (" (uncertain)" if r.uncertain else "")) for r in diag.itertuples()}
    claims = diag["label"].where(~diag["uncertain"], diag["label"] + " (uncertain)").value_counts()
    counts: dict[str, M.CharCounts] = defaultdict(M.CharCounts)
    per_q: dict[tuple[str, str], list] = defaultdict(list)
    for r in spans.itertuples():
        per_q[(status.get(r.claim_id, "?"), r.question_id)].append((int(r.answer_start), int(r.answer_end)))
    for (st, q), sp in per_q.items():
        a = by_q[q]
        counts[st].add(a.response, sp, _gold(a))
    rows = {}
    flagged_all = sum(c.tp + c.fp for c in counts.values()) or 1
    for st in sorted(set(claims.index) | set(counts)):
        c = counts.get(st, M.CharCounts())
        f = c.tp + c.fp
        rows[st] = {
            "claims": int(claims.get(st, 0)),
            "flagged_chars": f,
            "share_of_flagged": f / flagged_all,
            "precision": c.tp / f if f else None,
        }
    clean = M.CharCounts()
    judge_spans: dict[str, list] = defaultdict(list)
    for r in spans.itertuples():
        judge_spans[r.question_id].append((int(r.answer_start), int(r.answer_end)))
    for a in answers:
        if not a.hallucinated:
            clean.add(a.response, judge_spans.get(a.question_id, []), [])
    judged = diag[diag["label"] != "unjudged"]
    return {
        "by_claim_label": rows,
        "labels": {k: int(v) for k, v in diag["label"].value_counts().items()},
        "claims": len(diag),
        "uncertain_share": float(judged["uncertain"].mean()) if len(judged) else None,
        "flagged_share_of_clean_answer_chars": (clean.fp / clean.total) if clean.total else None,
    }


# ---------------------------------------------------------------- printing


def _f(v: float | None, width: int = 6) -> str:
    return f"{v:>{width}.3f}" if isinstance(v, float) else f"{'—':>{width}}"


HEAD = (f"{'method':<14}{'group':<20}{'n':>5}{'hal':>5}{'ansBA':>7}{'ansF1':>7}{'clean':>7}"
        f"{'chP':>7}{'chR':>7}{'chF1':>7}{'unc':>7}{'cfP':>7}{'cfR':>7}{'cfF1':>7}")


def table(figures: dict[str, dict]) -> str:
    lines = [HEAD]
    for m in METHODS:
        for model, by_method in figures.items():
            r = by_method[m]
            a, c, k = r["answer"], r["char"], r.get("conflict", {})
            lines.append(
                f"{m:<14}{model[:19]:<20}{a['answers']:>5}{a['hallucinated']:>5}"
                f"{_f(a['balanced_accuracy'], 7)}{_f(a['f1'], 7)}{_f(a['clean_flagged'], 7)}"
                f"{_f(c['precision'], 7)}{_f(c['recall'], 7)}{_f(c['f1'], 7)}"
                f"{_f(r.get('uncertain_share'), 7)}"
                f"{_f(k.get('precision'), 7)}{_f(k.get('recall'), 7)}{_f(k.get('f1'), 7)}"
            )
        lines.append("")
    return "\n".join(lines)


def print_diagnostics(name: str, d: dict) -> None:
    print(f"{name}: the judge's flagged characters by the label of their claim "
          f"({d['claims']} claims; uncertain {d['uncertain_share']:.3f} of judged claims)")
    print(f"  {'claim label':<30}{'claims':>8}{'flagged ch':>12}{'of flagged':>12}{'precision':>11}")
    for st, r in d["by_claim_label"].items():
        print(f"  {st:<30}{r['claims']:>8}{r['flagged_chars']:>12}{r['share_of_flagged']:>12.3f}"
              f"{_f(r['precision'], 11)}")
    print(f"  non-space characters of clean answers flagged: {d['flagged_share_of_clean_answer_chars']:.3f}\n")


# ---------------------------------------------------------------- main


def figures_of_set(name: str, answers: list[D.Answer], work: Path, judge: str = "local",
                   halves: tuple[str, ...] = ("all",), model: Path | None = None) -> dict:
    """One set through `ragspan evaluate` in `work` (emptied first), scored: what the JSON
    file holds per set (benchmarks/lodo/run.py reads it as its `ragtruth_dev` group)."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    out, seconds = evaluate(answers, work, judge, model)
    spans, diag, manifest = read_results(out)
    preds = predictions(answers, spans, diag)
    return {
        "answers": len(answers),
        "questions": len({a.source_id for a in answers}),
        "evaluate_seconds": round(seconds, 1),
        "judge": manifest.get("judge"),
        "code_version": manifest.get("code_version"),
        "figures": score_set(answers, preds, diag, halves),
        "diagnostics": diagnostics(answers, spans, diag),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default=",".join(D.SETS), help="comma-separated: qa_dev,data2txt")
    ap.add_argument("--limit", type=int, default=0, help="the first N answers of each set (0: all)")
    ap.add_argument("--split", action="store_true", help="also print the tune and report halves")
    ap.add_argument("--json", type=Path, help="write every figure to this file")
    ap.add_argument("--keep", type=Path, help="build the data and results here and keep them")
    ap.add_argument("--judge", default="local", choices=("local", "openai", "cascade"))
    args = ap.parse_args(argv)
    names = [s for s in args.sets.split(",") if s]
    halves = HALVES if args.split else ("all",)
    t0 = time.perf_counter()
    doc: dict = {
        "command": "python -m benchmarks.ragtruth " + " ".join(sys.argv[1:] if argv is None else argv),
        "commit": subprocess.run(["git", "rev-parse", "HEAD"], check=False, cwd=D.REPO,
                                 capture_output=True, text=True).stdout.strip(),
        # the commit of main this branch starts from: the ragspan code measured
        "main_base": subprocess.run(["git", "merge-base", "HEAD", "main"], check=False, cwd=D.REPO,
                                    capture_output=True, text=True).stdout.strip() or None,
        "data": str(D.RAGTRUTH.relative_to(D.REPO.parent)) if D.RAGTRUTH.is_relative_to(D.REPO.parent)
        else str(D.RAGTRUTH),
        "limit": args.limit or None,
        "judge": args.judge,
        "local_judge_model": os.environ.get("RAGSPAN_LOCAL_JUDGE_MODEL"),
        "split": "sha1(source_id)[0] even: tune, odd: report" if args.split else None,
        "sets": {},
    }
    root = args.keep or Path(tempfile.mkdtemp(prefix="ragspan-ragtruth-"))
    try:
        for name in names:
            answers = D.load(name, args.limit or None)
            doc["sets"][name] = figures_of_set(name, answers, root / name, args.judge, halves)
            seconds = doc["sets"][name]["evaluate_seconds"]
            print(f"\n== {name}: {len(answers)} answers, {doc['sets'][name]['questions']} questions; "
                  f"`ragspan evaluate` {seconds:.0f}s ==")
            for h in halves:
                n = sum(1 for a in answers if h == "all" or D.half(a.source_id) == h)
                print(f"\n-- {name}, {h} ({n} answers) --")
                print(table(doc["sets"][name]["figures"][h]))
            print_diagnostics(name, doc["sets"][name]["diagnostics"])
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    doc["seconds"] = round(time.perf_counter() - t0, 1)
    print(f"{doc['seconds']}s in all")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
