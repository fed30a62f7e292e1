"""The fitted verifier: a logistic regression over a few features (local-5) or
gradient-boosted trees (local-4), and their calibration maps, read from a JSON file of
numbers (never a pickle) and evaluated with NumPy — no scikit-learn at run time.
`python -m training.local_judge` writes local-5.json; local-4 (gradient-boosted trees,
fitted by a script since removed: docs/local-judge.md, History) is kept in benchmarks/lodo/
as a baseline.

    model = Model.load(path)
    P = model.matrix(X)          # rows of features in `model.features` order
    p_supported, p_partial, p_unsupported = P[i]
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np


class _Trees:
    """Gradient-boosted regression trees: raw = baseline + sum of reached leaf values;
    at a split go left when x[feature] <= threshold."""

    def __init__(self, spec: dict) -> None:
        self.baseline = float(spec["baseline"])
        self.trees = [
            (np.asarray(t["feature"], np.int64), np.asarray(t["threshold"], np.float64), np.asarray(t["left"], np.int64),
             np.asarray(t["right"], np.int64), np.asarray(t["is_leaf"], bool), np.asarray(t["value"], np.float64))
            for t in spec["trees"]
        ]
        self._lists = [(t["feature"], t["threshold"], t["left"], t["right"], t["is_leaf"], t["value"]) for t in spec["trees"]]

    def raw_one(self, x: Sequence[float]) -> float:
        """One row in plain Python (~40x faster than `raw` on a single row); the same
        additions in the same order as `raw`, so the same float."""
        out = self.baseline
        for feat, thr, left, right, leaf, value in self._lists:
            n = 0
            while not leaf[n]:
                n = left[n] if x[feat[n]] <= thr[n] else right[n]
            out += value[n]
        return out

    def raw(self, X: np.ndarray) -> np.ndarray:
        """Vectorised over rows: every row walks each tree level by level."""
        out = np.full(len(X), self.baseline)
        rows = np.arange(len(X))
        for feat, thr, left, right, leaf, value in self.trees:
            node = np.zeros(len(X), np.int64)
            while True:
                active = ~leaf[node]
                if not active.any():
                    break
                f = feat[node]
                go_left = X[rows, f] <= thr[node]
                node = np.where(active, np.where(go_left, left[node], right[node]), node)
            out += value[node]
        return out


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


class _Logistic:
    """A linear score over standardised features: raw = ((x - mean) / scale) . coef + intercept."""

    def __init__(self, spec: dict) -> None:
        self.mean = np.asarray(spec["mean"], np.float64)
        self.scale = np.asarray(spec["scale"], np.float64)
        self.coef = np.asarray(spec["coef"], np.float64)
        self.intercept = float(spec["intercept"])

    def raw(self, X: np.ndarray) -> np.ndarray:
        return ((X - self.mean) / self.scale) @ self.coef + self.intercept

    def raw_one(self, x: Sequence[float]) -> float:
        return float(self.raw(np.asarray([x], np.float64))[0])


class Model:
    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.version: str = spec["version"]
        self.features: list[str] = spec["features"]
        self.threshold: float = float(spec["threshold"])
        self.kind: str = spec.get("kind", "trees")
        sc = spec["short_circuit"]
        self.bound: float = float(sc["bound"])
        self._short = np.asarray(sc["probabilities"], np.float64)
        self._agg = spec.get("claim_aggregate_platt")
        # The short-circuit feature need not be one the model weighs (cov_all is always
        # computed): its column is looked up in the full row when absent here.
        self._bound_idx = self.features.index(sc["feature"]) if sc["feature"] in self.features else None
        if self.kind in ("logistic", "boosted"):  # one score -> Platt -> P(supported)
            m = spec["supported"]["model"]
            self._lin = _Logistic(m) if self.kind == "logistic" else _Trees(m)
            self._sup_platt = spec["supported"]["platt"]
            return
        self._sup = _Trees(spec["supported"]["model"])
        self._sup_platt = spec["supported"]["platt"]
        self._part = _Trees(spec["partial_given_not_supported"]["model"])
        self._part_platt = spec["partial_given_not_supported"]["platt"]

    @classmethod
    def load(cls, path: str | Path) -> Model:
        with open(path, encoding="utf-8") as f:
            return cls(json.load(f))

    def matrix(self, X: np.ndarray) -> np.ndarray:
        """(n, 3) probabilities (supported, partial, unsupported) for rows in `features` order."""
        X = np.asarray(X, np.float64)
        if self.kind in ("logistic", "boosted"):
            # One probability: P(supported); partial vs unsupported is the verifier's
            # rule (is the window about the claim), so the rest is split evenly here.
            a, b = self._sup_platt
            ps = _sigmoid(a * self._lin.raw(X) + b)
            P = np.stack([ps, (1 - ps) / 2, (1 - ps) / 2], 1)
        else:
            P = self._trees_matrix(X)
        if self._bound_idx is not None:
            P[X[:, self._bound_idx] < self.bound] = self._short
        return P

    def _trees_matrix(self, X: np.ndarray) -> np.ndarray:
        a, b = self._sup_platt
        ps = _sigmoid(a * self._sup.raw(X) + b)
        a2, b2 = self._part_platt
        q = _sigmoid(a2 * self._part.raw(X) + b2)
        return np.stack([ps, (1 - ps) * q, (1 - ps) * (1 - q)], 1)

    def probabilities(self, features: Mapping[str, float] | Sequence[float]) -> tuple[float, float, float]:
        """(P(supported), P(partial), P(unsupported)) of one pair."""
        if isinstance(features, Mapping):
            row = [float(features[n]) for n in self.features]
        else:
            row = [float(v) for v in features]
        if self.kind in ("logistic", "boosted"):
            ps, pp, pu = self.matrix(np.asarray([row], np.float64))[0].tolist()
            return ps, pp, pu
        if self._bound_idx is not None and row[self._bound_idx] < self.bound:
            return float(self._short[0]), float(self._short[1]), float(self._short[2])
        a, b = self._sup_platt
        ps = 1.0 / (1.0 + math.exp(-(a * self._sup.raw_one(row) + b)))
        a2, b2 = self._part_platt
        q = 1.0 / (1.0 + math.exp(-(a2 * self._part.raw_one(row) + b2)))
        return ps, (1 - ps) * q, (1 - ps) * (1 - q)

    def claim_supported(self, p_supported_per_passage: Sequence[float]) -> tuple[bool, float | None]:
        """Claim level over its passages: supported iff max P(supported) >= threshold; the
        second value is the max mapped by the claim-aggregate Platt map (fitted on
        Factcheck-style ~5-passage lists), None when the model has none."""
        m = max(p_supported_per_passage)
        cal = None
        if self._agg:
            z = np.log(np.clip(m, 1e-6, 1 - 1e-6) / (1 - np.clip(m, 1e-6, 1 - 1e-6)))
            cal = float(_sigmoid(self._agg[0] * z + self._agg[1]))
        return m >= self.threshold, cal
