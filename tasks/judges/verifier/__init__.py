"""The learned verifier behind the local judge: features of (question, claim, passage)
→ a small fitted model → calibrated probabilities of supported / partial / unsupported.

- features.py: lexical and question-aware coverage (weighted by word rarity), the best
  1–2 sentence window (what is quoted), support spread over several sentences, numbers,
  names and negation as features (not vetoes), claim and passage shape.
- model.py: the fitted trees and calibration maps, evaluated with NumPy.
- local-4.json: the packaged model (numbers only); word_zipf.json: word rarity.

A pair whose passage holds less than the model's bound of the claim's content words
is not segmented at all: it gets the model's fixed short-circuit probabilities (most
retrieved chunks at scale). `RAGSPAN_LOCAL_JUDGE_MODEL` points the judge at another
fitted model file (the cross-validated benchmarks use it); the model's content hash is
part of the judge's version, hence of every cache key.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
from ragspan.tasks.judges.verifier.features import (
    FEATURES,
    Claim,
    claim_profile,
    pair_features,
    passage_norms,
    unsupported_bound,
)
from ragspan.tasks.judges.verifier.model import Model

MODEL_ENV = "RAGSPAN_LOCAL_JUDGE_MODEL"
PACKAGED_MODEL = Path(__file__).with_name("local-4.json")

# (verdict, confidence, support, quote, quote_start, reason); verdict "!no_content" marks
# a claim without words to check. Plain tuples: cheap to send back from worker processes.
Row = tuple[str, float | None, float | None, str | None, int | None, str]

_AT = {name: i for i, name in enumerate(FEATURES)}
# A claim that restates its question is supported only if the passage holds at least this
# (rarity-weighted) share of the words it adds to the question.
NEW_WORDS_MIN = 0.5


def model_path() -> Path:
    """The model file the local judge uses: RAGSPAN_LOCAL_JUDGE_MODEL, else the packaged one."""
    given = os.environ.get(MODEL_ENV, "").strip()
    return Path(given) if given else PACKAGED_MODEL


class Verifier:
    def __init__(self, path: Path) -> None:
        raw = path.read_bytes()
        self.path = path
        self.model = Model.load(path)
        self.digest = hashlib.sha256(raw).hexdigest()
        self.threshold = self.model.threshold
        self._columns = [_AT[name] for name in self.model.features]
        self._short = tuple(float(p) for p in self.model.spec["short_circuit"]["probabilities"])
        guard = self.model.spec.get("contradiction_guard") or {}
        self._guard_coverage = float(guard.get("min_window_coverage", 2.0))  # > 1: never
        self._guard_support = float(guard.get("support", 0.0))
        # `supported` also needs this much of the claim in the quoted sentences: a high
        # probability from words scattered over a passage is not a quotable support.
        self._min_cov = float(self.model.spec.get("min_support_window_coverage", 0.0))
        # A window that states nearly all of the claim, every number and name included and
        # the same negation, supports it even where the trees (trained mostly on whole-page
        # claims, where long claims are rarely fully supported) doubt it.
        self._lexical_cov = float((self.model.spec.get("lexical_support") or {}).get("min_window_coverage", 2.0))

    @property
    def version(self) -> str:
        """`local-4.0+<12 hex of the model file>`: the judge's identity in cache keys."""
        return f"{self.model.version}+{self.digest[:12]}"

    def rows(self, items: Sequence[tuple[str, Sequence[str], str, bool]]) -> list[list[Row]]:
        """Verdict rows for many (claim, passages, question, whole_answer), the model run
        once over all."""
        out: list[list[Row | None]] = []
        pending: list[tuple[int, int, list[float], int | None, int | None, str, bool]] = []
        for claim, passages, question, whole_answer in items:
            profile = claim_profile(claim, question or "", whole_answer)
            if profile is None:
                out.append([("!no_content", None, None, None, None, "the claim has no words to check")]
                           * len(passages))
                continue
            # The claim restates part of its question: only the words it adds are evidence.
            restates = profile.new != profile.content
            mine: list[Row | None] = []
            for passage in passages:
                if unsupported_bound(profile, passage) < self.model.bound:
                    mine.append(self._short_row())
                    continue
                r = pair_features(profile, passage)
                pending.append((len(out), len(mine), r.features, r.quote_start, r.quote_end, passage, restates,
                                profile))
                mine.append(None)
            out.append(mine)
        if pending:
            X = np.asarray([[feats[c] for c in self._columns] for _i, _j, feats, *_ in pending], dtype=np.float64)
            P = self.model.matrix(X)
            for (i, j, feats, qs, qe, passage, restates, prof), (ps, pp, pu) in zip(pending, P.tolist(), strict=True):
                out[i][j] = self._row(ps, pp, pu, feats, qs, qe, passage, restates, prof)
        return out  # type: ignore[return-value]

    @lru_cache(maxsize=1)  # noqa: B019 — one verifier per model file lives for the process
    def _short_row(self) -> Row:
        ps, _pp, pu = self._short
        return ("unsupported", round(pu, 6), round(ps, 6), None, None,
                f"P(supported) {ps:.2f}: the passage holds less than {self.model.bound:.0%} of the claim's words")

    def _row(self, ps: float, pp: float, pu: float, f: list[float], qs: int | None, qe: int | None,
             passage: str, restates: bool = False, profile: Claim | None = None) -> Row:
        reason = _reason(ps, f, _missing_words(profile, passage, qs, qe))
        if restates and f[_AT["new_wcov_u3"]] < NEW_WORDS_MIN:
            # What the passage shares with the claim is its question: no evidence for the
            # answer. P(supported) is capped where the model's own short-circuit puts it.
            ps = min(ps, self._short[0])
            reason += f"; only {f[_AT['new_wcov_u3']]:.0%} of the words the claim adds to its question are there"
        if qs is None or qe is None:  # nothing of the claim in any sentence: nothing to quote
            return ("unsupported", round(pu, 6), round(ps, 6), None, None, reason)
        quote = passage[qs:qe]
        if self._contradicts(f):
            # The window states the claim with a number replaced or the negation flipped:
            # about the claim and contradicting it, whatever the trees say (they saw few
            # such pairs). Its probability is what such pairs turned out to be.
            ps = min(ps, self._guard_support)
            return ("partial", round(1 - ps, 6), round(ps, 6), quote, qs, reason)
        if (f[_AT["cov_w"]] >= self._lexical_cov and f[_AT["num_found_w"]] >= 1 and f[_AT["ent_found_w"]] >= 1
                and not f[_AT["neg_mismatch"]]):
            ps = max(ps, self.threshold)
        if ps >= self.threshold and f[_AT["cov_w"]] >= self._min_cov:
            return ("supported", round(ps, 6), round(ps, 6), quote, qs, reason)
        if pp >= pu and f[_AT["cov_w"]] >= self._min_cov:  # about it: as much of it as support needs
            return ("partial", round(pp, 6), round(ps, 6), quote, qs, reason)
        return ("unsupported", round(pu, 6), round(ps, 6), None, None, reason)


    def _contradicts(self, f: list[float]) -> bool:
        return (f[_AT["wcov_w"]] >= self._guard_coverage
                and (f[_AT["num_conflict"]] > 0 or f[_AT["neg_mismatch"]] > 0))


def _missing_words(profile: Claim | None, passage: str, qs: int | None, qe: int | None
                   ) -> tuple[list[str], list[str]]:
    """(the claim's names absent from the passage, its numbers absent from the quoted
    sentences), each as written in the claim — what a reason quotes instead of stems."""
    if profile is None:
        return [], []
    names = [profile.surface.get(e, e) for e in sorted(profile.entities - passage_norms(passage))]
    window = passage_norms(passage[qs:qe]) if qs is not None and qe is not None else frozenset()
    numbers = [profile.surface.get(n, n) for n in sorted(profile.numbers - window)] if window else []
    return names, numbers


def _plural(noun: str, words: list[str]) -> str:
    return noun + ("s" if len(words) > 1 else "")


def _quoted(words: list[str], limit: int = 3) -> str:
    shown = ", ".join(f"'{w}'" for w in words[:limit])
    return shown + (f" (+{len(words) - limit} more)" if len(words) > limit else "")


def _reason(ps: float, f: list[float], missing: tuple[list[str], list[str]] = ([], [])) -> str:
    """What the probability rests on, in words: the claim's own words when one is missing
    (never stems, never feature names)."""
    names, numbers = missing
    parts = [f"P(supported) {ps:.2f}", f"{f[_AT['cov_w']]:.0%} of the claim's words in the quoted sentences"]
    if f[_AT["wcov_u3"]] > f[_AT["wcov_w"]] + 0.05:
        parts.append(f"{f[_AT['cov_all']]:.0%} in the whole passage")
    if f[_AT["num_conflict"]]:
        parts.append("the quoted sentences give another number")
    elif f[_AT["num_found_w"]] < 1:
        parts.append(f"{_plural('number', numbers)} of the claim not in the quoted sentences: {_quoted(numbers)}"
                     if numbers else
                     "a number of the claim is not in the quoted sentences")
    if f[_AT["ent_found_all"]] < 1:
        parts.append(f"{_plural('name', names)} of the claim not in the passage: {_quoted(names)}" if names else
                     "a name of the claim is not in the passage")
    if f[_AT["neg_mismatch"]]:
        parts.append("negation differs")
    return "; ".join(parts)


@lru_cache(maxsize=4)
def _verifier_at(path: str, mtime_ns: int) -> Verifier:
    return Verifier(Path(path))


def verifier(path: Path | None = None) -> Verifier:
    """The verifier for `path` (default: model_path()), loaded once per file version."""
    p = (path or model_path()).resolve()
    return _verifier_at(str(p), p.stat().st_mtime_ns)
