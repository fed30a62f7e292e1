"""Leave one dataset out: every local-judge design and the baselines, one table per set.

    .venv/bin/python -m benchmarks.lodo.run [--limit 1500] [--seed 13] [--no-contexttrace]
        [--name NAME] [--pipeline all|SET,...]

For each of the eight sets (training/readers/lodo_sets.py; the dialogue pair is one), every
design is fitted on the other seven (training/local_judge.py) and predicts it; the verdicts
come from the verifier's own `decide` on the judge's own features, so they are the
pipeline's verdicts for a claim judged against its passages (the best-covering pair
decides). Per set and design: balanced accuracy (supported vs not), AUC and ECE of the
reported P(supported), the `uncertain` share (P within 0.1 of 0.5: what the cascade would
send to an LLM), and for WiCE and ClapNQ the span hit rate and mean IoU of supported
verdicts against the gold supporting sentences.

Baselines in the same run: (a) ContextTrace 1.3 offline (benchmarks/baselines/, its own
venv; --no-contexttrace skips it), (b) `lr7-plain`, a class-balanced logistic
regression over 7 plain coverage features fitted leave-one-set-out, no rules, and (c)
`local-4` (tasks/judges/verifier/local-4.json as packaged before: its trees on the same
features, supported at P >= its threshold 0.35, without its guards).

The design is chosen by the table: the highest mean balanced accuracy, unless a simpler
design (earlier in training.local_judge.DESIGNS) is within 0.01 on the mean and not lower on the minimum.
Planted failures (benchmarks/lodo/planted.py) are judged by each design fitted on all
eight sets — they are never trained on. Within-set 5-fold CV of the chosen design is a
secondary column. `--pipeline all` (or `ragtruth_dev` among the names) adds RAGTruth dev
as one more held-out group: real RAG answers, never fitted on, so the design fitted on all
eight sets judges them through `ragspan evaluate` (benchmarks/ragtruth: per answer balanced
accuracy and per character F1, per RAGTruth set). Figures: benchmarks/results/lodo-<name>.json. The benchmark writes no
model file: `python -m training.local_judge --design CHOSEN` fits the chosen design on all
eight sets and writes tasks/judges/verifier/local-5.json.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.lodo import metrics as M
from benchmarks.lodo import planted as P
from training import local_judge as F
from training.readers import lodo_sets as S

REPO = Path(__file__).resolve().parents[2]
LOCAL4 = Path(__file__).resolve().parent / "local-4.json"
SPAN_SETS = ("wice", "clapnq")


def scores(p: np.ndarray, pred: np.ndarray, y: np.ndarray) -> dict:
    return {
        "n": len(y),
        "balanced_accuracy": round(M.balanced_accuracy(pred, y), 4),
        "auc": None if (a := M.auc(p, y)) is None else round(a, 4),
        "ece": round(M.ece(p, y), 4),
        "uncertain": round(float((np.abs(p - 0.5) < 0.1).mean()), 4),
        "predicted_supported": round(float(pred.mean()), 4),
    }


def span_scores(rows: F.Rows, idx: np.ndarray, pred: np.ndarray, y: np.ndarray) -> dict:
    """Of gold-supported claims called supported with gold spans: how often the quote
    overlaps a gold supporting sentence, and the mean best IoU."""
    hits, ious = [], []
    for k, i in enumerate(idx.tolist()):
        if not (pred[k] and y[k] and rows.gold_spans[i]):
            continue
        q = rows.quote[i]
        if q is None:
            hits.append(False)
            ious.append(0.0)
            continue
        best = 0.0
        hit = False
        for s, e in rows.gold_spans[i]:
            inter = max(0, min(e, q[1]) - max(s, q[0]))
            hit |= inter > 0
            best = max(best, inter / (max(e, q[1]) - min(s, q[0])))
        hits.append(hit)
        ious.append(best)
    if not hits:
        return {"span_n": 0}
    return {"span_n": len(hits), "span_hit": round(float(np.mean(hits)), 4), "span_iou": round(float(np.mean(ious)), 4)}


LENGTH_BINS = ((0, 200), (200, 400), (400, 10**9))  # claim characters


def by_length(lengths: np.ndarray, pred: np.ndarray, y: np.ndarray) -> dict[str, dict]:
    """Share called supported vs gold supported per claim-length bin: are long claims,
    whose support spreads over sentences, judged as often as the gold says?"""
    out = {}
    for lo, hi in LENGTH_BINS:
        m = (lengths > lo) & (lengths <= hi)
        if m.any():
            out[f"{lo}-{hi if hi < 10**9 else ''}"] = {"n": int(m.sum()), "called_supported": round(float(pred[m].mean()), 3),
                                                      "gold_supported": round(float(y[m].mean()), 3)}
    return out


def lodo(rows: F.Rows, design: str) -> dict[str, dict]:
    sets, X, y, empty = rows.arrays()
    out = {}
    for name in S.SETS:
        test = sets == name
        model = F.fit_model(rows, ~test, design)
        p, pred, _ = F.predict(model, X[test], empty[test])
        r = scores(p, pred, y[test])
        if name in SPAN_SETS:
            r.update(span_scores(rows, np.flatnonzero(test), pred, y[test]))
        r["by_claim_length"] = by_length(np.asarray(rows.claim_len)[test], pred, y[test])
        out[name] = r
    return out


def plain_probability(model: dict, X: np.ndarray, empty: np.ndarray) -> np.ndarray:
    """P(supported) of the regression in `model` alone: no short-circuit, no rules."""
    lin, (a, b) = model["supported"]["model"], model["supported"]["platt"]
    cols = [F.AT[f] for f in model["features"]]
    z = ((X[:, cols] - np.asarray(lin["mean"])) / np.asarray(lin["scale"])) @ np.asarray(lin["coef"])
    p = 1 / (1 + np.exp(-(a * (z + lin["intercept"]) + b)))
    p[empty] = 0.0
    return p


def lr7_plain(rows: F.Rows) -> dict[str, dict]:
    """Baseline (b): the 7-feature regression alone, P >= 0.5, calibrated as the designs."""
    sets, X, y, empty = rows.arrays()
    out = {}
    for name in S.SETS:
        test = sets == name
        p = plain_probability(F.fit_model(rows, ~test, "lr7"), X[test], empty[test])
        out[name] = scores(p, p >= 0.5, y[test])
    return out


def local4(rows: F.Rows) -> dict[str, dict]:
    from ragspan.tasks.judges.verifier.model import Model

    sets, X, y, empty = rows.arrays()
    mdl = Model.load(LOCAL4)
    p = mdl.matrix(X[:, [F.AT[f] for f in mdl.features]])[:, 0]
    p[empty] = 0.0
    return {name: scores(p[sets == name], p[sets == name] >= mdl.threshold, y[sets == name]) for name in S.SETS}


def contexttrace(cases: dict[str, list]) -> dict[str, dict]:
    from benchmarks.baselines.contexttrace import run_contexttrace

    out = {}
    for name, cs in cases.items():
        items = [{"id": str(i), "question": c.question, "claim": c.claim, "passages": c.passages} for i, c in enumerate(cs)]
        got = run_contexttrace(items)
        y = np.asarray([c.gold == "supported" for c in cs], np.int64)
        pred = np.asarray([got[str(i)][0] for i in range(len(cs))])
        p = np.asarray([(got[str(i)][1] if got[str(i)][1] is not None else float(got[str(i)][0])) for i in range(len(cs))])
        r = scores(np.clip(p, 0, 1), pred, y)
        out[name] = r
    return out


def within_set(rows: F.Rows, design: str, folds: int = 5, seed: int = 13) -> dict[str, float]:
    """Balanced accuracy of `design` fitted on 4/5 of a set alone, predicting the rest."""
    sets, X, y, empty = rows.arrays()
    out = {}
    for name in S.SETS:
        idx = np.flatnonzero(sets == name)
        order = idx.copy()
        random.Random(seed).shuffle(order)
        fold = np.empty(len(sets), int)
        fold[order] = np.arange(len(order)) % folds
        preds = np.zeros(len(sets), bool)
        for k in range(folds):
            train = np.zeros(len(sets), bool)
            train[idx] = fold[idx] != k
            test = idx[fold[idx] == k]
            m = _fit_single(rows, train, design)
            _, pr, _ = F.predict(m, X[test], empty[test])
            preds[test] = pr
        out[name] = round(M.balanced_accuracy(preds[idx], y[idx]), 4)
    return out


def _fit_single(rows: F.Rows, keep: np.ndarray, design: str) -> dict:
    """fit_model on one set: no inner leave-one-set-out, Platt on the training scores."""
    return F.fit_model(rows, keep, design, inner=False)


def planted_plain(rows_all: F.Rows, items: list[P.Planted]) -> dict[str, dict]:
    """Baseline (b) on the planted family: the 7-feature regression alone, P >= 0.5."""
    m = F.fit_model(rows_all, np.ones(len(rows_all.y), bool), "lr7")
    return planted_with(lambda X, empty: plain_probability(m, X, empty) >= 0.5, items)


def planted(rows_all: F.Rows, design: str, items: list[P.Planted]) -> dict[str, dict]:
    model = F.fit_model(rows_all, np.ones(len(rows_all.y), bool), design)
    return planted_with(lambda X, e: F.predict(model, X, e)[1], items)


def planted_with(predict, items: list[P.Planted]) -> dict[str, dict]:
    feats, empty = [], []
    for it in items:
        f, _, _ = F.case_row(it.claim, "", it.passages)
        feats.append(f or [0.0] * len(F.AT))
        empty.append(f is None)
    pred = predict(np.asarray(feats), np.asarray(empty))
    out = {}
    for kind in P.KINDS:
        m = np.asarray([it.kind == kind for it in items])
        share = float(pred[m].mean()) if m.any() else float("nan")
        key = "supported" if kind == "control" else "not_supported"
        out[kind] = {"n": int(m.sum()), key: round(share if kind == "control" else 1 - share, 4)}
    changed = np.asarray([it.kind != "control" for it in items])
    out["all_changed"] = {"n": int(changed.sum()), "not_supported": round(1 - float(pred[changed].mean()), 4)}
    return out


def through_pipeline(rows: F.Rows, cases: dict[str, list], design: str, names: list[str], workdir: Path) -> dict:
    """The held-out sets again, through `ragspan evaluate` (bring-your-own claims, every
    passage in context, no corpus-wide search; benchmarks/lodo/pipeline.py) with the model
    fitted without that set: the pipeline's labels, not the harness's."""
    from benchmarks.lodo.pipeline import case_rows, run_pipeline

    sets = np.asarray(rows.set)
    out = {}
    for name in names:
        model = F.write(F.fit_model(rows, sets != name, design), workdir / name / "model.json")
        res = run_pipeline(cases[name], workdir / name, model_path=model)
        r = case_rows(cases[name], res.diagnoses, 0)
        y = (r["gold"] == "supported").to_numpy().astype(np.int64)
        pred = (r["label"] == "correct").to_numpy()
        p = r["prob"].fillna(0.0).to_numpy()
        out[name] = {**scores(p, pred, y), "unjudged": int((r["label"] == "unjudged").sum()),
                     "seconds": round(res.seconds, 1)}
    return out


def ragtruth_group(rows: F.Rows, design: str, workdir: Path) -> dict:
    """RAGTruth dev as one more held-out group: its answers are never fitted on, so its
    left-out model is the design fitted on every set. Scored per answer (an answer flagged
    when any character of it is `unsupported` or `contradicted`) and per character, as
    benchmarks/ragtruth prints them: one row per RAGTruth set (QA answers, data2txt)."""
    from benchmarks.ragtruth import data as RD
    from benchmarks.ragtruth.run import figures_of_set

    model = F.write(F.fit_model(rows, np.ones(len(rows.set), dtype=bool), design), workdir / "model.json")
    out = {}
    for name in RD.SETS:
        got = figures_of_set(name, RD.load(name, None), workdir / name, model=model)
        judge = got["figures"]["all"]["all"]["judge"]
        out[f"ragtruth_dev/{name}"] = {"answer_ba": judge["answer"]["balanced_accuracy"],
                                       "char_f1": judge["char"]["f1"],
                                       "clean_flagged": judge["answer"]["clean_flagged"],
                                       "uncertain": judge["uncertain_share"],
                                       "answers": got["answers"], "seconds": got["evaluate_seconds"]}
    return out


def choose(table: dict[str, dict[str, dict]]) -> str:
    def stats(d: str) -> tuple[float, float]:
        v = [table[d][s]["balanced_accuracy"] for s in S.SETS]
        return float(np.mean(v)), float(np.min(v))

    designs = list(F.DESIGNS)
    best = max(designs, key=lambda d: stats(d)[0])
    for d in designs:  # simplest first
        if stats(d)[0] >= stats(best)[0] - 0.01 and stats(d)[1] >= stats(best)[1]:
            return d
    return best


def print_table(table: dict[str, dict[str, dict]], metric: str) -> None:
    names = list(table)
    print(f"\n{metric}")
    print(f"{'set':<17}" + "".join(f"{n:>13}" for n in names))
    for s in S.SETS:
        cells = []
        for n in names:
            v = table[n].get(s, {}).get(metric)
            cells.append(f"{v:>13.3f}" if isinstance(v, float) else f"{'—':>13}")
        print(f"{s:<17}" + "".join(cells))
    for label, fn in (("mean", np.mean), ("min", np.min)):
        cells = []
        for n in names:
            vals = [table[n][s][metric] for s in S.SETS if isinstance(table[n].get(s, {}).get(metric), float)]
            cells.append(f"{fn(vals):>13.3f}" if vals else f"{'—':>13}")
        print(f"{label:<17}" + "".join(cells))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--no-contexttrace", action="store_true")
    ap.add_argument("--name", default="local-5")
    ap.add_argument("--pipeline", default="", help="comma-separated sets to re-run through `ragspan evaluate` "
                    "(held out, chosen design); 'all' for every set")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    cases = {name: S.load(name, args.limit, args.seed) for name in S.SETS}
    rows = F.rows_for(cases)
    print(f"{sum(map(len, cases.values()))} cases in {len(cases)} sets, features in {time.perf_counter() - t0:.1f}s")

    table: dict[str, dict[str, dict]] = {d: lodo(rows, d) for d in F.DESIGNS}
    chosen = choose(table)
    baselines = {"lr7-plain": lr7_plain(rows), "local-4": local4(rows)}
    if not args.no_contexttrace:
        baselines["contexttrace"] = contexttrace(cases)
    full = {**table, **baselines}
    for metric in ("balanced_accuracy", "auc", "ece", "uncertain"):
        print_table(full, metric)
    print_table({d: table[d] for d in F.DESIGNS}, "span_hit")
    cv = within_set(rows, chosen)
    print(f"\nchosen design: {chosen}; within-set 5-fold CV balanced accuracy: {cv}")

    items = P.build(seed=args.seed)
    planted_res = {d: planted(rows, d, items) for d in F.DESIGNS}
    planted_res["lr7-plain"] = planted_plain(rows, items)
    print("\nplanted failures in long WiCE pages (not used in fitting):")
    for d, r in planted_res.items():
        print(f"  {d:<8} " + "  ".join(f"{k} {next(iter(v2 for k2, v2 in v.items() if k2 != 'n')):.3f} (n={v['n']})"
                                     for k, v in r.items()))

    piped = {}
    if args.pipeline:
        names = list(S.SETS) if args.pipeline == "all" else args.pipeline.split(",")
        with tempfile.TemporaryDirectory(prefix="ragspan-lodo-") as tmp:
            piped = through_pipeline(rows, cases, chosen, names, Path(tmp))
        print(f"\nthrough `ragspan evaluate`, {chosen} fitted without the set:")
        for name, r in piped.items():
            print(f"  {name:<17} balanced accuracy {r['balanced_accuracy']:.3f}  AUC {r['auc']}  ECE {r['ece']:.3f}"
                  f"  unjudged {r['unjudged']}  ({r['seconds']}s)  [harness: {table[chosen][name]['balanced_accuracy']:.3f}]")

    ragtruth = {}
    if args.pipeline == "all" or "ragtruth_dev" in args.pipeline.split(","):
        with tempfile.TemporaryDirectory(prefix="ragspan-lodo-ragtruth-") as tmp:
            ragtruth = ragtruth_group(rows, chosen, Path(tmp))
        print(f"\nragtruth_dev (one more group, never fitted on: {chosen} fitted on all {len(S.SETS)} sets), "
              "per answer, through `ragspan evaluate` (benchmarks/ragtruth):")
        for name, r in ragtruth.items():
            print(f"  {name:<17} balanced accuracy {r['answer_ba']:.3f}  char F1 {r['char_f1']:.3f}"
                  f"  clean flagged {r['clean_flagged']:.3f}  uncertain {r['uncertain']:.3f}  ({r['seconds']}s)")

    commit = subprocess.run(["git", "rev-parse", "HEAD"], check=False, cwd=REPO, capture_output=True, text=True).stdout.strip()
    doc = {
        "name": args.name,
        "command": "python -m benchmarks.lodo.run " + " ".join(sys.argv[1:] if argv is None else argv),
        "commit": commit,
        "limit": args.limit,
        "seed": args.seed,
        "chosen": chosen,
        "lodo": full,
        "within_set_cv": {chosen: cv},
        "planted": planted_res,
        "pipeline": piped,
        "ragtruth_dev": ragtruth,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    out = REPO / "benchmarks" / "results" / f"lodo-{args.name}.json"
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"\n{doc['seconds']}s; written to {out}")
    print(f"to ship it: .venv/bin/python -m training.local_judge --design {chosen} "
          f"--limit {args.limit} --seed {args.seed}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
