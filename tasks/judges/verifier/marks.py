"""Answer spans: which characters of a claim its passage leaves unsupported or contradicts.

Pure functions over what the verifier already computed for a (claim, passage) pair — the
claim's profile, the passage's (lru-cached) profile and the `PairResult` (THE window, the
sentences assembled over the page) — plus the conflicts `decide` found. Offsets are code
points into the ORIGINAL claim text: a "Yes."/"No." or one-word answer is judged as the
statement its question makes with it, but only the answer's own words can be marked.

- `contradicted`: what a conflict changed — the claim's number, unit, name or negation
  that the window states differently; the evidence is the window's differing word
  (passage offsets).
- `unsupported`: phrases of the claim the support the judge found (THE window and the
  sentences that best cover the claim, `PairResult.fit`) does not hold. Which words: a
  small logistic regression over each word's WORD_FEATURES (absent from the window, from
  the support, from the page; rarity; number; name; how much of its clause and of the
  claim is missing; its neighbours; stopword next to absent words), fitted on WiCE train
  (marks-1.json; training/answer_marks.py) and run with NumPy. It may mark a
  stopword beside absent words (people mark "in January 2010", not "January 2010") and a
  word the passage holds only where most of its clause is missing; marked words are
  joined into one mark across the stopwords between them.
- Words the claim takes from its question are never marked (the judge never counts them
  as missing either).

Marks are plain tuples `(start, end, kind, evidence_start, evidence_end)` (cheap to send
back from worker processes), sorted, non-overlapping, never empty, never starting or
ending on whitespace or punctuation.
"""

from __future__ import annotations

import json
import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from ragspan.tasks.judges.verifier.conflicts import NEGATION, Span
from ragspan.tasks.judges.verifier.features import FEATURES, PairResult, added_words
from ragspan.tasks.judges.verifier.profiles import Claim
from ragspan.tasks.judges.verifier.tokens import Token, clause_breaks

Mark = tuple[int, int, str, int | None, int | None]  # (start, end, kind, evidence_start, evidence_end)

# A word the support holds may be marked (by the word model) only in a clause missing at
# least this weighted share of its words: half, set a priori, not fitted.
WEAK_CLAUSE = 0.5
PACKAGED_WORD_MODEL = Path(__file__).with_name("marks-1.json")


@dataclass(frozen=True)
class WordModel:
    """P(a word of the claim is unsupported) from `word_features`: a logistic regression
    fitted on WiCE train (training/answer_marks.py), numbers in a JSON file, run with
    NumPy. A word is marked when P ≥ threshold (chosen on train by cross-validation)."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    threshold: float

    @classmethod
    def load(cls, path: Path) -> WordModel:
        spec = json.loads(path.read_text(encoding="utf-8"))
        if tuple(spec["features"]) != WORD_FEATURES:
            raise ValueError(f"{path}: fitted on other word features than marks.WORD_FEATURES")
        return cls(tuple(spec["features"]), np.asarray(spec["mean"], np.float64),
                   np.asarray(spec["scale"], np.float64), np.asarray(spec["coef"], np.float64),
                   float(spec["intercept"]), float(spec["threshold"]))

    def marked(self, X: list[list[float]]) -> list[bool]:
        z = ((np.asarray(X, np.float64) - self.mean) / self.scale) @ self.coef + self.intercept
        return (z >= math.log(self.threshold / (1 - self.threshold))).tolist()


@lru_cache(maxsize=1)
def packaged_word_model() -> WordModel:
    return WordModel.load(PACKAGED_WORD_MODEL)


def claim_marks(profile: Claim, result: PairResult, conflicts: Sequence[str],
                model: WordModel | None = None) -> tuple[Mark, ...]:
    """The marks of one judged pair (see the module docstring); () without a window.
    `conflicts`: the conflicts `decide` found (their located clashes are contradicted).
    `model`: the word model (default: the packaged marks-1.json; the fit passes others)."""
    if result.window is None:
        return ()
    support = result.window_norms | result.fit
    if not conflicts and profile.content <= support:
        # Every word found and nothing changed: no mark is possible (most judged pairs;
        # the cheap exit keeps the judge's cost where it was).
        return ()
    if profile.polar is not None:
        return _polar_marks(profile, result, support, conflicts)
    if not profile.written:
        return ()
    contra: dict[Span, Span] = {}
    for c in result.clashes:  # in the detectors' order: a word located twice keeps the later evidence
        if c.kind in conflicts and c.claim is not None and c.window is not None:
            contra[c.claim] = c.window
    at, X = word_features(profile, result, support, candidates=True)
    flags = [False] * len(profile.written)
    if at:
        for k, m in zip(at, (model or packaged_word_model()).marked(X), strict=True):
            flags[k] = m
    # What the claim adds that the passage never states (a number, name or rare word:
    # the positive evidence a failing verdict rests on) is always marked.
    added = added_words(profile, result.passage_norms)
    if added:
        for k, t in enumerate(profile.written):
            if t.info.norm in added and not t.info.is_stop:
                flags[k] = True
    return _spans(profile.text, profile.written, flags, contra)


# ------------------------------------------------------------------- word features
WORD_FEATURES: tuple[str, ...] = (
    "stop",             # a stopword (or negation): marked only inside or at the edge of a phrase
    "absent_window",    # a content word absent from THE window
    "absent_support",   # ... and from the sentences assembled over the page (what the judge found)
    "absent_page",      # ... anywhere in the passage
    "soft_found",       # absent from the support, but a support word shares its first 5 letters (paraphrase)
    "weight",           # rarity weight / 6 (content words)
    "number",           # a number
    "name",             # a name or code (capitalised, not sentence-initial)
    "clause_missing",   # weighted share of its clause's content words absent from the support
    "clause_missing_w", # ... absent from THE window
    "claim_missing",    # 1 - cov_fit: how much of the claim the judge did not find
    "claim_missing_w",  # 1 - wcov_w
    "prev_absent",      # the nearest content word before it is absent from the support
    "next_absent",      # ... after it
    "stop_between",     # a stopword between two absent content words
    "stop_before",      # a stopword right before an absent content word (a phrase's "the", "in")
    "position",         # token index / tokens: where in the claim
    "later_clause",     # not in the claim's first clause
    "negated",          # in the reach of the claim's negation
    "near_absent",      # share of the content words within _NEAR words of it absent from the support
    "near_absent_w",    # ... absent from THE window
    "clause_words",     # content words in its clause / 10 (short clauses are marked whole more often)
)
_NEAR = 3  # words each side: a phrase people mark is a few words long
_F = {name: i for i, name in enumerate(FEATURES)}


def word_features(profile: Claim, result: PairResult, support: frozenset[str],
                  candidates: bool = False) -> tuple[list[int], list[list[float]]]:
    """(indices into the claim's written tokens, their WORD_FEATURES rows): every word of
    the claim, or with `candidates` only the words the model may mark (the fit sees them all).

    The model decides among the words absent from the support and the stopwords beside
    them; a word the passage holds only where most of its clause is missing (the clause is
    what is unsupported), so a fully supported claim has no mark. A stopword whose nearest
    content words cannot be marked could never join a mark: it is not scored."""
    toks, asked = profile.written, profile.asked
    window = result.window_norms
    prefixes = {w[:5] for w in window | result.fit if len(w) >= 5}
    content = [not t.info.is_stop and t.info.norm in profile.weights for t in toks]
    absent = [c and t.info.norm not in support and t.info.norm not in asked for c, t in zip(content, toks, strict=True)]
    clause_of = [0] * len(toks)
    clause_miss: list[tuple[float, float]] = []
    for n, (lo, hi) in enumerate(_clauses(profile)):
        words = [toks[k].info.norm for k in range(lo, hi) if content[k]]
        total = math.fsum(profile.weights[w] for w in words)
        miss = math.fsum(profile.weights[w] for w in words if w not in support) / total if total else 0.0
        miss_w = math.fsum(profile.weights[w] for w in words if w not in window) / total if total else 0.0
        clause_miss.append((miss, miss_w))
        for k in range(lo, hi):
            clause_of[k] = n
    prev_abs, nxt_abs = _neighbour_flags(content, absent)
    near, near_w = _near_shares(content, absent), _near_shares(content, _absent_from(content, toks, window, asked))
    clause_size = [0] * len(clause_miss)
    for k, c in enumerate(content):
        clause_size[clause_of[k]] += c
    feats = result.features
    claim_missing, claim_missing_w = 1 - feats[_F["cov_fit"]], 1 - feats[_F["wcov_w"]]
    n = len(toks)
    if candidates:
        can = [absent[k] or (content[k] and toks[k].info.norm not in asked
                             and clause_miss[clause_of[k]][0] >= WEAK_CLAUSE) for k in range(n)]
        prev_can, next_can = _neighbour_flags(content, can)
        at = [k for k in range(n) if can[k] or (not content[k] and (prev_can[k] or next_can[k]))]
    else:
        at = list(range(n))
    rows = []
    for k in at:
        t = toks[k]
        f = t.info
        c = content[k]
        stop = not c
        rows.append([
            float(stop),
            float(c and f.norm not in window),
            float(absent[k]),
            float(c and f.norm not in result.passage_norms),
            float(absent[k] and f.norm[:5] in prefixes and len(f.norm) >= 5),
            profile.weights.get(f.norm, 0.0) / 6 if c else 0.0,
            float(f.is_number),
            float(c and f.is_entity and (k > 0 or t.raw.isupper())),
            clause_miss[clause_of[k]][0],
            clause_miss[clause_of[k]][1],
            claim_missing,
            claim_missing_w,
            float(prev_abs[k]),
            float(nxt_abs[k]),
            float(stop and prev_abs[k] and nxt_abs[k]),
            float(stop and k + 1 < n and absent[k + 1]),
            k / n,
            float(clause_of[k] > 0),
            float(c and f.norm in profile.neg_loose),
            near[k],
            near_w[k],
            min(clause_size[clause_of[k]], 10) / 10,
        ])
    return at, rows


def _absent_from(content: list[bool], toks: Sequence[Token], window: frozenset[str],
                 asked: frozenset[str]) -> list[bool]:
    return [c and t.info.norm not in window and t.info.norm not in asked for c, t in zip(content, toks, strict=True)]


def _near_shares(content: list[bool], flag: list[bool]) -> list[float]:
    """Per token: the share of the content words within _NEAR tokens of it (itself
    included) that are flagged — prefix sums, linear in the claim's length."""
    n = len(content)
    cs, fs = [0], [0]
    for c, f in zip(content, flag, strict=True):
        cs.append(cs[-1] + c)
        fs.append(fs[-1] + (c and f))
    out = []
    for k in range(n):
        lo, hi = max(0, k - _NEAR), min(n, k + _NEAR + 1)
        m = cs[hi] - cs[lo]
        out.append((fs[hi] - fs[lo]) / m if m else 0.0)
    return out


def _neighbour_flags(content: list[bool], absent: list[bool]) -> tuple[list[bool], list[bool]]:
    """Per token: is the nearest content word before it / after it absent."""
    prev, last = [], False
    for c, a in zip(content, absent, strict=True):
        prev.append(last)
        if c:
            last = a
    nxt, last = [], False
    for c, a in zip(reversed(content), reversed(absent), strict=True):
        nxt.append(last)
        if c:
            last = a
    return prev, nxt[::-1]


def _clauses(profile: Claim) -> list[tuple[int, int]]:
    """Token ranges of the claim's clauses as written (tokens.clause_breaks)."""
    out, start = [], 0
    for k, sep in enumerate(clause_breaks(profile.text, profile.written)):
        if sep and k > start:
            out.append((start, k))
            start = k
    if len(profile.written) > start:
        out.append((start, len(profile.written)))
    return out


def _polar_marks(profile: Claim, result: PairResult, support: frozenset[str],
                 conflicts: Sequence[str]) -> tuple[Mark, ...]:
    """A "Yes."/"No." answer: its polar word, when the statement it makes is contradicted
    (the window negates it otherwise) or not fully in the support."""
    if NEGATION in conflicts:
        for c in result.clashes:
            if c.kind == NEGATION and c.claim is not None and c.window is not None:
                return ((*c.claim, "contradicted", *c.window),)
    if profile.content - support:
        first = profile.written[0]
        return ((first.start, first.end, "unsupported", None, None),)
    return ()


# ------------------------------------------------------------------------- spans
def _spans(claim: str, toks: Sequence[Token], flags: list[bool], contra: dict[Span, Span]) -> tuple[Mark, ...]:
    """Marked tokens as phrases: each contradicted word (or "5%") alone; unsupported
    words joined across the stopwords between them, never across an unmarked content
    word or a contradicted one."""
    out: list[Mark] = []
    run: tuple[int, int] | None = None  # the unsupported phrase being built
    spoken = False  # it holds a content word (stopwords alone are never a mark)
    spans = sorted(contra.items())
    c = 0  # the next contradicted span
    for k, (s, e, _raw, f) in enumerate(toks):
        if c < len(spans) and spans[c][0][0] <= s:
            (cs, ce), (es, ee) = spans[c]
            if run:
                out += _unsupported_mark(claim, run, spoken)
                run, spoken = None, False
            out.append((cs, _end(claim, ce), "contradicted", es, ee))
            while c < len(spans) and spans[c][0][0] < ce:
                c += 1  # (a span overlapping the one written is dropped: marks never overlap)
        if out and out[-1][2] == "contradicted" and s < out[-1][1]:
            continue  # inside the contradicted span just written
        if flags[k]:
            run = (s, e) if run is None else (run[0], e)
            spoken = spoken or not f.is_stop
        elif not f.is_stop and run:
            out += _unsupported_mark(claim, run, spoken)
            run, spoken = None, False
    if run:
        out += _unsupported_mark(claim, run, spoken)
    return tuple(out)


def _unsupported_mark(claim: str, run: tuple[int, int], spoken: bool) -> list[Mark]:
    return [(run[0], _end(claim, run[1]), "unsupported", None, None)] if spoken else []


def _end(claim: str, e: int) -> int:
    """A mark ends after the combining marks of its last letter (never splits a character
    as displayed: "é" written e + U+0301)."""
    while e < len(claim) and unicodedata.combining(claim[e]):
        e += 1
    return e
