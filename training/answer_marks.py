"""Fit the answer-span word model (tasks/judges/verifier/marks-1.json) on WiCE TRAIN only.

    .venv/bin/python -m training.answer_marks [--out tasks/judges/verifier/marks-1.json]

A logistic regression over marks.WORD_FEATURES predicts, per word of a claim, whether
people marked it unsupported (WiCE `non_supported_tokens_train`: a word is unsupported
when it overlaps a token so marked). Pairs are the product's: the claim judged against
its evidence sentences joined by line breaks (the short-circuited ones have no window,
hence no marks, and are left out of the fit). The regularisation C and the decision
threshold are chosen by 5-fold cross-validation over claims on train, scored as the
benchmark benchmarks/answer_spans/run.py scores (WiCE word F1 of the marks `claim_marks`
ships, merging included), whose WiCE reader (`../shared/data/wice_dev`) it uses. Dev is
never read here. scikit-learn is used at fit time only; the product runs the
coefficients with NumPy.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np
from ragspan.tasks.judges.verifier import PACKAGED_MODEL, Verifier, decide
from ragspan.tasks.judges.verifier.features import pair_features
from ragspan.tasks.judges.verifier.marks import WORD_FEATURES, WordModel, claim_marks, word_features
from ragspan.tasks.judges.verifier.profiles import claim_profile, passage_profile
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold

from training.readers import wice_words

CS = (0.03, 0.1, 0.3, 1.0, 3.0)
THRESHOLDS = tuple(round(t, 2) for t in np.arange(0.25, 0.71, 0.05))
FOLDS = 5


@dataclasses.dataclass
class Case:
    claim: str
    passage: str
    gold: list
    profile: object
    result: object
    conflicts: tuple[str, ...]
    X: list[list[float]]
    y: list[int]


def cases(split: str, verifier: Verifier) -> list[Case]:
    out = []
    for r in wice_words.wice(split):
        claim, passage = r["claim"], "\n".join(r["evidence"])
        gold = wice_words.wice_gold(r)
        prof = claim_profile(claim, "", False)
        if prof is None:
            continue
        res = pair_features(prof, passage)
        if res.window is None:
            continue
        X0 = np.asarray([[res.features[c] for c in verifier._columns]], np.float64)
        d = decide(float(verifier.model.matrix(X0)[0, 0]), res.features, verifier.rules)
        p = passage_profile(passage)
        i, j = res.window
        _at, X = word_features(prof, res, frozenset(p.norms[i:j]) | res.fit)
        bad = [(s, e) for (s, e), b in gold if b]
        y = [int(any(s < be and bs < e for bs, be in bad)) for s, e, _, _ in prof.written]
        out.append(Case(claim, passage, gold, prof, res, d.conflicts, X, y))
    return out


def fit(train: list[Case], C: float) -> WordModel:
    X = np.asarray([x for c in train for x in c.X], np.float64)
    y = np.asarray([v for c in train for v in c.y])
    mean, scale = X.mean(0), X.std(0)
    scale[scale == 0] = 1.0
    lr = LogisticRegression(C=C, max_iter=2000).fit((X - mean) / scale, y)
    return WordModel(WORD_FEATURES, mean, scale, lr.coef_[0], float(lr.intercept_[0]), 0.5)


def f1(cs: list[Case], model: WordModel) -> float:
    return wice_words.score((c.gold, [(s, e) for s, e, *_ in claim_marks(c.profile, c.result, c.conflicts, model)])
                     for c in cs)["f1"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "tasks" / "judges"
                    / "verifier" / "marks-1.json")
    args = ap.parse_args(argv)
    verifier = Verifier(PACKAGED_MODEL)
    train = cases("train", verifier)
    groups = np.arange(len(train))
    grid: dict[tuple[float, float], list[float]] = {}
    for tr, te in GroupKFold(FOLDS).split(groups, groups=groups):
        for C in CS:
            m = fit([train[k] for k in tr], C)
            for t in THRESHOLDS:
                grid.setdefault((C, t), []).append(f1([train[k] for k in te], dataclasses.replace(m, threshold=t)))
    (C, t), scores = max(grid.items(), key=lambda kv: (np.mean(kv[1]), -kv[0][0]))
    print(f"chosen on train CV: C={C} threshold={t} word F1 {np.mean(scores):.3f} (folds {np.round(scores, 3)})")
    m = dataclasses.replace(fit(train, C), threshold=t)
    spec = {
        "version": "marks-1",
        "kind": "logistic",
        "design": "P(word unsupported) over marks.WORD_FEATURES; marked when P >= threshold",
        "features": list(WORD_FEATURES),
        "mean": m.mean.tolist(), "scale": m.scale.tolist(), "coef": m.coef.tolist(),
        "intercept": m.intercept, "threshold": t, "C": C,
        "trained_on": "WiCE non_supported_tokens_train (claims with a window)",
        "cv_word_f1": round(float(np.mean(scores)), 4), "n_claims": len(train),
        "n_words": sum(len(c.y) for c in train),
    }
    args.out.write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
    for name, w in sorted(zip(WORD_FEATURES, m.coef.tolist(), strict=True), key=lambda kv: -abs(kv[1])):
        print(f"  {name:<18}{w:+.3f}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
