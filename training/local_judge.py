"""Fit the local judge's model file (tasks/judges/verifier/local-5.json) on the eight LODO sets.

    .venv/bin/python -m training.local_judge [--design lr7] [--limit 1500] [--seed 13]
    .venv/bin/python -m training.local_judge --without xquad,clapnq --out /tmp/local-5-wo.json

A case's row is its claim against the passage that best covers it (highest weighted
coverage over as many sentences as the claim has clauses, then the quoted window), the
same pair whose P(supported) decides the claim in the pipeline for all but the
multi-snippet Factcheck-GPT claims. The features are the judge's own
(tasks/judges/verifier/features.py), profiled as the pipeline does for a claim that is a
whole answer. The cases come from training/readers/lodo_sets.py (read from `../shared/data`).

Fitting (`fit_model`): a class-balanced logistic regression in which each training set
weighs the same (a 1,500-item set does not drown a 350-item one), standardised features,
L2 (C=1). Its Platt map is fitted on inner leave-one-set-out predictions (for each
training set, a regression fitted on the others), so the calibration is that of a set
the model has not seen — the situation it will be used in. The conflict cap and the
short-circuit probability are the supported share of the training pairs concerned.

The design is chosen by the leave-one-dataset-out benchmark (`python -m benchmarks.lodo.run`
prints the chosen one; it fits every design per fold with `fit_model`); without
`--design` the shipped file's design is refitted. Without `--without` the model is fitted
on all eight sets and written to the shipped file; `--without SETS --out PATH` writes a
model that never saw SETS (the judge for a benchmark built from those sets' documents,
e.g. benchmarks/accuracy.py's taxonomy cases from XQuAD and ClapNQ, run with
RAGSPAN_LOCAL_JUDGE_MODEL=PATH).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from ragspan.tasks.judges.verifier import CONFLICTS, Rules
from ragspan.tasks.judges.verifier.features import FEATURES, pair_features
from ragspan.tasks.judges.verifier.profiles import claim_profile
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression

AT = {name: i for i, name in enumerate(FEATURES)}
SHORT_BOUND = 0.25  # cov_all below this: the short-circuit (no segmentation) at run time

# Baseline (b) of the issue: plain coverage, at most 8 features.
LR7 = ("cov_all", "cov_w", "new_cov_all", "new_cov_w", "num_found_all", "ent_new_all", "len_claim")
# local-5 candidates, simplest first; a richer design must beat a simpler one to be chosen.
DESIGNS: dict[str, tuple[str, ...]] = {
    "lr7": LR7,
    "lr12": LR7 + ("wcov_w", "cov_fit", "new_wcov_u3", "bigram_w", "density_w"),
    "lr12c": LR7 + ("wcov_w", "cov_fit", "new_wcov_u3", "bigram_w", "density_w", *CONFLICTS),
    "lr_all": tuple(FEATURES),
    "gb7": LR7,  # monotone boosted trees over the baseline's 7 features
}


def _scorer(design: str, X: np.ndarray, y: np.ndarray, sets: np.ndarray) -> Linear | Boosted:
    if design.startswith("gb"):
        return fit_boosted(X, y, sets, DESIGNS[design])
    return fit_linear(X, y, sets)


@dataclass
class Rows:
    """One row per case: features of its deciding pair, gold, and what scoring needs."""

    set: list[str] = field(default_factory=list)
    X: list[list[float]] = field(default_factory=list)
    y: list[int] = field(default_factory=list)  # gold == supported
    empty: list[bool] = field(default_factory=list)  # no content word: judged unsupported
    quote: list[tuple[int, int] | None] = field(default_factory=list)  # in passages[0] only
    gold_spans: list[list[tuple[int, int]]] = field(default_factory=list)
    claim_len: list[int] = field(default_factory=list)  # characters

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return (np.asarray(self.set), np.asarray(self.X, np.float64), np.asarray(self.y, np.int64),
                np.asarray(self.empty, bool))


def case_row(claim: str, question: str, passages: Sequence[str]) -> tuple[list[float] | None, tuple[int, int] | None, int]:
    """(features of the best-covering pair, its quote span, its passage index); None
    features when the claim has no content word."""
    prof = claim_profile(claim, question or "", True)
    if prof is None:
        return None, None, -1
    best = None
    for k, passage in enumerate(passages):
        r = pair_features(prof, passage)
        key = (r.features[AT["cov_fit"]], r.features[AT["wcov_w"]], -k)
        if best is None or key > best[0]:
            best = (key, r, k)
    assert best is not None
    _, r, k = best
    quote = (r.quote_start, r.quote_end) if r.quote_start is not None else None
    return r.features, quote, k


def rows_for(sets: dict[str, list]) -> Rows:
    rows = Rows()
    zero = [0.0] * len(FEATURES)
    for name, cases in sets.items():
        for c in cases:
            feats, quote, k = case_row(c.claim, c.question, c.passages)
            rows.set.append(name)
            rows.X.append(feats or zero)
            rows.y.append(int(c.gold == "supported"))
            rows.empty.append(feats is None)
            rows.quote.append(quote if k == 0 else None)
            rows.gold_spans.append(list(c.gold_spans))
            rows.claim_len.append(len(c.claim))
    return rows


def _weights(sets: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each set weighs the same, and within it each class half."""
    w = np.zeros(len(y))
    names = sorted(set(sets.tolist()))
    for s in names:
        for cls in (0, 1):
            m = (sets == s) & (y == cls)
            if m.any():
                w[m] = 1.0 / (2 * len(names) * m.sum())
    return w * len(y)


@dataclass
class Linear:
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float

    def raw(self, X: np.ndarray) -> np.ndarray:
        return ((X - self.mean) / self.scale) @ self.coef + self.intercept


def fit_linear(X: np.ndarray, y: np.ndarray, sets: np.ndarray) -> Linear:
    mean = X.mean(0)
    scale = X.std(0)
    scale[scale < 1e-9] = 1.0
    lr = LogisticRegression(C=1.0, max_iter=2000)
    lr.fit((X - mean) / scale, y, sample_weight=_weights(sets, y))
    return Linear(mean, scale, lr.coef_[0].copy(), float(lr.intercept_[0]))


@dataclass
class Boosted:
    """Gradient-boosted trees, each feature's effect constrained to be monotone (more of
    the claim found never lowers P(supported)): sharper than a line, and unable to learn
    a set's quirks that run against the evidence."""

    model: HistGradientBoostingClassifier

    def raw(self, X: np.ndarray) -> np.ndarray:
        return self.model.decision_function(X)

    def export(self) -> dict:
        trees = []
        for it in self.model._predictors:
            nd = it[0].nodes
            trees.append({k: nd[src].astype(t).tolist() for k, src, t in (
                ("feature", "feature_idx", int), ("threshold", "num_threshold", float), ("left", "left", int),
                ("right", "right", int), ("is_leaf", "is_leaf", int), ("value", "value", float))})
        return {"baseline": float(np.ravel(self.model._baseline_prediction)[0]), "trees": trees}


# +1: more of it never lowers P(supported); 0: free (length).
MONOTONE = {"len_claim": 0, "len_passage": 0, "from_question": 0}


def fit_boosted(X: np.ndarray, y: np.ndarray, sets: np.ndarray, features: Sequence[str]) -> Boosted:
    m = HistGradientBoostingClassifier(
        max_iter=60, learning_rate=0.1, max_depth=3, l2_regularization=1.0, early_stopping=False, random_state=0,
        monotonic_cst=[MONOTONE.get(f, 1) for f in features])
    m.fit(X, y, sample_weight=_weights(sets, y))
    return Boosted(m)


def fit_platt(z: np.ndarray, y: np.ndarray, sets: np.ndarray) -> tuple[float, float]:
    """P(supported) = sigmoid(a z + b), each set weighing the same, classes as they come
    (the probability is of support, not of a balanced draw)."""
    w = np.zeros(len(y))
    for s in set(sets.tolist()):
        m = sets == s
        w[m] = 1.0 / m.sum()
    lr = LogisticRegression(C=1e6, max_iter=1000)
    lr.fit(z.reshape(-1, 1), y, sample_weight=w * len(y))
    return float(lr.coef_[0][0]), float(lr.intercept_[0])


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def fit_model(rows: Rows, keep: np.ndarray, design: str, version: str = "local-5.2", inner: bool = True) -> dict:
    """The model file (a dict) fitted on the rows where `keep`, design `design`. With
    `inner` False (one training set: within-set CV), Platt is fitted on the training
    scores themselves."""
    sets, X, y, empty = rows.arrays()
    m = keep & ~empty
    cols = [AT[f] for f in DESIGNS[design]]
    Xs, ys, ss = X[m][:, cols], y[m], sets[m]
    scorer = _scorer(design, Xs, ys, ss)
    # Platt on inner leave-one-set-out scores: calibrated for an unseen set.
    z = np.zeros(len(ys))
    names = sorted(set(ss.tolist()))
    for s in names if inner and len(names) > 1 else ():
        rest = ss != s
        z[~rest] = _scorer(design, Xs[rest], ys[rest], ss[rest]).raw(Xs[~rest])
    if not inner or len(names) == 1:
        z = scorer.raw(Xs)
    a, b = fit_platt(z, ys, ss)
    Xa, ya = X[m], ys
    conflict = np.zeros(len(ya), bool)
    for k in CONFLICTS:
        conflict |= Xa[:, AT[k]] > 0
    conflict_support = float(np.clip(ya[conflict].mean() if conflict.any() else 0.05, 0.01, 0.49))
    low = Xa[:, AT["cov_all"]] < SHORT_BOUND
    p_short = float(np.clip(ya[low].mean() if low.any() else 0.01, 0.001, 0.49))
    if isinstance(scorer, Boosted):
        kind, spec = "boosted", scorer.export()
    else:
        kind, spec = "logistic", {"mean": scorer.mean.tolist(), "scale": scorer.scale.tolist(),
                                  "coef": scorer.coef.tolist(), "intercept": scorer.intercept}
    return {
        "version": version,
        "kind": kind,
        "design": design,
        "features": list(DESIGNS[design]),
        "threshold": 0.5,
        "supported": {"model": spec, "platt": [a, b]},
        "rules": {"conflict_support": round(conflict_support, 6)},
        "short_circuit": {"feature": "cov_all", "bound": SHORT_BOUND, "probabilities": [p_short, 0.0, 1 - p_short]},
        "trained_on": {s: int((ss == s).sum()) for s in names},
    }


def predict(model: dict, X: np.ndarray, empty: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(P(supported) after the rules, supported?, verdicts) for feature rows, exactly as
    the verifier decides (its own `decide`)."""
    from ragspan.tasks.judges.verifier import decide
    from ragspan.tasks.judges.verifier.model import Model

    mdl = Model(model)
    cols = [AT[f] for f in model["features"]]
    ps_raw = mdl.matrix(X[:, cols])[:, 0]
    rules = Rules(threshold=mdl.threshold, **{k: float(v) for k, v in (model.get("rules") or {}).items()})
    out_p, verdicts = np.zeros(len(X)), []
    for i, (row, p) in enumerate(zip(X.tolist(), ps_raw.tolist(), strict=True)):
        if empty[i]:
            out_p[i], v = 0.0, "unsupported"
        elif row[AT["cov_all"]] < mdl.bound:
            out_p[i], v = float(mdl.spec["short_circuit"]["probabilities"][0]), "unsupported"
        else:
            d = decide(p, row, rules)
            out_p[i], v = d.support, d.verdict
        verdicts.append(v)
    return out_p, np.asarray([v == "supported" for v in verdicts]), verdicts


def write(model: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(model, indent=1) + "\n", encoding="utf-8")
    return path


REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "tasks" / "judges" / "verifier" / "local-5.json"


def main(argv: list[str] | None = None) -> int:
    import argparse

    from training.readers import lodo_sets

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--design", default=None, choices=list(DESIGNS),
                    help="default: the shipped file's design")
    ap.add_argument("--without", default="", help="comma-separated sets left out (needs --out)")
    ap.add_argument("--out", type=Path, default=None, help=f"default {SHIPPED.relative_to(REPO)}")
    ap.add_argument("--limit", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args(argv)
    left_out = sorted(filter(None, args.without.split(",")))
    if left_out and args.out is None:
        ap.error("--without needs --out: the shipped file is fitted on all eight sets")
    design = args.design or json.loads(SHIPPED.read_text(encoding="utf-8"))["design"]
    rows = rows_for({n: lodo_sets.load(n, args.limit, args.seed) for n in lodo_sets.SETS})
    keep = ~np.isin(np.asarray(rows.set), left_out)
    if left_out:
        model = fit_model(rows, keep, design, version="local-5.2-without-" + "-".join(left_out))
    else:
        model = fit_model(rows, keep, design)
        model["trained_on_sets"] = "leave-one-dataset-out design choice; fitted on all eight sets"
    print(f"{design} -> {write(model, args.out or SHIPPED)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
