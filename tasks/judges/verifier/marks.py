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
  (marks-1.json; benchmarks/answer_spans/fit.py) and run with NumPy. It may mark a
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
from ragspan.tasks.core.text import word_info
from ragspan.tasks.judges.verifier.features import (
    FEATURES,
    NEG_SCOPE,
    Claim,
    PairResult,
    Passage,
    _clause_words,
    _rounds_to,
    _short_answer,
    _words,
    fold,
    negation_reach,
    passage_profile,
    quantity_spans,
    slot_clashes,
)

Mark = tuple[int, int, str, int | None, int | None]  # (start, end, kind, evidence_start, evidence_end)

# A word the support holds may be marked (by the word model) only in a clause missing at
# least this weighted share of its words: half, set a priori, not fitted.
WEAK_CLAUSE = 0.5
# Where a conflict's evidence is chosen among several candidate words of the window: the
# one with a word of the claim within this many tokens (the same slot of the sentence).
_ANCHOR_REACH = 3

_Token = tuple[int, int, str, tuple]  # (start, end, raw, word_info)
PACKAGED_WORD_MODEL = Path(__file__).with_name("marks-1.json")


@dataclass(frozen=True)
class WordModel:
    """P(a word of the claim is unsupported) from `word_features`: a logistic regression
    fitted on WiCE train (benchmarks/answer_spans/fit.py), numbers in a JSON file, run with
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


def claim_marks(claim: str, question: str, whole_answer: bool, profile: Claim, passage: str,
                result: PairResult, conflicts: Sequence[str], model: WordModel | None = None,
                ) -> tuple[Mark, ...]:
    """The marks of one judged pair (see the module docstring); () without a window.
    `model`: the word model (default: the packaged marks-1.json; the fit passes others)."""
    if result.window is None:
        return ()
    p = passage_profile(passage)  # lru-cached: the pair's features built it already
    i, j = result.window
    support = result.window_norms | result.fit
    if not conflicts and profile.content <= support:
        # Every word found and nothing changed: no mark is possible (most judged pairs;
        # the cheap exit keeps the judge's cost where it was).
        return ()
    if profile.polar is not None:
        return _polar_marks(claim, profile, p, i, j, support, conflicts)
    toks = [(s, e, raw, word_info(raw)) for s, e, raw in _words(claim)]
    if not toks:
        return ()
    asked = _asked(question, whole_answer, claim)
    contra = _contradicted(claim, toks, profile, passage, p, i, j, conflicts, asked)
    at, X = word_features(claim, toks, profile, p, i, j, result, support, asked, candidates=True)
    flags = [False] * len(toks)
    if at:
        for k, m in zip(at, (model or packaged_word_model()).marked(X), strict=True):
            flags[k] = m
    return _spans(claim, toks, flags, contra)


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


def word_features(claim: str, toks: list[_Token], profile: Claim, p: Passage, i: int, j: int,
                  result: PairResult, support: frozenset[str], asked: frozenset[str],
                  candidates: bool = False) -> tuple[list[int], list[list[float]]]:
    """(token indices, their WORD_FEATURES rows): every word of the claim, or with
    `candidates` only the words the model may mark (the fit sees them all).

    The model decides among the words absent from the support and the stopwords beside
    them; a word the passage holds only where most of its clause is missing (the clause is
    what is unsupported), so a fully supported claim has no mark. A stopword whose nearest
    content words cannot be marked could never join a mark: it is not scored."""
    window = result.window_norms
    prefixes = {w[:5] for w in window | result.fit if len(w) >= 5}
    content = [not f[4] and f[0] in profile.weights for _, _, _, f in toks]
    absent = [c and f[0] not in support and f[0] not in asked for c, (_, _, _, f) in zip(content, toks, strict=True)]
    clause_of = [0] * len(toks)
    clause_miss: list[tuple[float, float]] = []
    for n, (lo, hi) in enumerate(_clauses(claim, toks)):
        words = [toks[k][3][0] for k in range(lo, hi) if content[k]]
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
        can = [absent[k] or (content[k] and toks[k][3][0] not in asked and clause_miss[clause_of[k]][0] >= WEAK_CLAUSE)
               for k in range(n)]
        prev_can, next_can = _neighbour_flags(content, can)
        at = [k for k in range(n) if can[k] or (not content[k] and (prev_can[k] or next_can[k]))]
    else:
        at = list(range(n))
    rows = []
    for k in at:
        _s, _e, raw, f = toks[k]
        c = content[k]
        stop = not c
        rows.append([
            float(stop),
            float(c and f[0] not in window),
            float(absent[k]),
            float(c and f[0] not in p.all_norms),
            float(absent[k] and f[0][:5] in prefixes and len(f[0]) >= 5),
            profile.weights.get(f[0], 0.0) / 6 if c else 0.0,
            float(f[1]),
            float(c and f[2] and (k > 0 or raw.isupper())),
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
            float(c and f[0] in profile.neg_loose),
            near[k],
            near_w[k],
            min(clause_size[clause_of[k]], 10) / 10,
        ])
    return at, rows


def _absent_from(content: list[bool], toks: list[_Token], window: frozenset[str], asked: frozenset[str]) -> list[bool]:
    return [c and t[3][0] not in window and t[3][0] not in asked for c, t in zip(content, toks, strict=True)]


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


# ------------------------------------------------------------------------ which words
def _asked(question: str, whole_answer: bool, claim: str) -> frozenset[str]:
    """Norms the claim may take from its question without being marked. A short answer's
    own words are what it asserts: none of them count as taken."""
    if not question or (whole_answer and _short_answer(claim)):
        return frozenset()
    return frozenset(word_info(raw)[0] for _, _, raw in _words(question))


def _markable(f: tuple, profile: Claim, asked: frozenset[str]) -> bool:
    """A content word of the claim that is not its question's."""
    return not f[4] and f[0] not in asked and f[0] in profile.weights


def _clauses(claim: str, toks: list[_Token]) -> list[tuple[int, int]]:
    """Token ranges of the claim's clauses (features._clause_words' boundaries)."""
    out, start = [], 0
    for k, (_s, _e, _raw, sep) in enumerate(_clause_words(claim, [t[:3] for t in toks])):
        if sep and k > start:
            out.append((start, k))
            start = k
    if len(toks) > start:
        out.append((start, len(toks)))
    return out


# ------------------------------------------------------------------- contradictions
def _contradicted(claim: str, toks: list[_Token], profile: Claim, passage: str, p: Passage, i: int, j: int,
                  conflicts: Sequence[str], asked: frozenset[str]) -> dict[tuple[int, int], tuple[int, int]]:
    """(claim span) → (passage span of the window's differing word), per conflict fired."""
    out: dict[tuple[int, int], tuple[int, int]] = {}
    if "num_new_conflict" in conflicts:
        out.update(_number_marks(toks, profile, p, i, j))
    if "unit_conflict" in conflicts:
        out.update(_unit_marks(claim, passage, p, i, j))
    if "ent_conflict" in conflicts:
        out.update(_name_marks(toks, profile, passage, p, i, j))
    if "neg_conflict" in conflicts:
        out.update(_negation_marks(toks, profile, passage, p, i, j, asked))
    return out


def _pick(cands: list[int], p: Passage, anchors: frozenset[str]) -> int:
    """Of the window's candidate tokens, the one next to a word of the claim (its slot)."""
    for k in cands:
        if anchors & set(p.norms[max(0, k - _ANCHOR_REACH):k + 1 + _ANCHOR_REACH]):
            return k
    return cands[0]


def _neighbours(toks: list[_Token], k: int) -> frozenset[str]:
    """Content norms of the claim within reach of token k."""
    lo, hi = max(0, k - _ANCHOR_REACH), k + 1 + _ANCHOR_REACH
    return frozenset(f[0] for _, _, _, f in toks[lo:hi] if not f[4]) - {toks[k][3][0]}


def _number_marks(toks: list[_Token], profile: Claim, p: Passage, i: int, j: int) -> dict:
    window = {p.norms[k] for k in range(i, j) if p.numbers[k]}
    others = [k for k in range(i, j) if p.numbers[k] and p.norms[k] not in profile.numbers]
    out = {}
    for k, (s, e, _raw, f) in enumerate(toks):
        if f[1] and f[0] in profile.new_numbers and f[0] not in window and others \
                and not any(_rounds_to(f[0], w) for w in window):
            x = _pick(others, p, _neighbours(toks, k))
            out[(s, e)] = (p.starts[x], p.ends[x])
    return out


def _unit_marks(claim: str, passage: str, p: Passage, i: int, j: int) -> dict:
    base = p.starts[i]
    win = [(n, u, s + base, e + base) for n, u, s, e in quantity_spans(passage[base:p.ends[j - 1]])]
    out = {}
    for n, u, s, e in quantity_spans(claim):
        stated = [(ws, we) for wn, wu, ws, we in win if wn == n]
        if stated and not any(wu == u for wn, wu, _, _ in win if wn == n):
            out[(s, e)] = stated[0]
    return out


def _name_marks(toks: list[_Token], profile: Claim, passage: str, p: Passage, i: int, j: int) -> dict:
    """A name of the claim's own in no spelling in the window, against the window's name
    the claim does not have; else a slot clash (features.slot_clashes)."""
    base = p.starts[i]
    wtoks = [(s + base, e + base, raw) for s, e, raw in _words(passage[base:p.ends[j - 1]])]
    infos = [word_info(raw) for _, _, raw in wtoks]
    wnorms = [f[0] for f in infos]
    wset = frozenset(wnorms)
    squeezed = "".join(c for c in fold(passage[base:p.ends[j - 1]]).casefold() if c.isalnum())
    others = [k for k, f in enumerate(infos)
              if f[2] and not f[1] and (k > 0 or wtoks[k][2].isupper()) and f[0] not in profile.content]
    out = {}
    for spellings, letters in zip(profile.name_spellings, profile.name_letters, strict=True):
        if spellings & wset or letters in squeezed or not others:
            continue
        for k, (s, e, _raw, f) in enumerate(toks):
            if f[0] in spellings:
                x = others[0]
                near = _neighbours(toks, k)
                for y in others:
                    if near & set(wnorms[max(0, y - _ANCHOR_REACH):y + 1 + _ANCHOR_REACH]):
                        x = y
                        break
                out[(s, e)] = (wtoks[x][0], wtoks[x][1])
    if not out:
        names = [(f[2] and (k > 0 or wtoks[k][2].isupper())) or f[1] for k, f in enumerate(infos)]
        for name, x in slot_clashes(profile, wnorms, names):
            for s, e, _raw, f in toks:
                if f[0] == name:
                    out[(s, e)] = (wtoks[x][0], wtoks[x][1])
    return out


def _negation_marks(toks: list[_Token], profile: Claim, passage: str, p: Passage, i: int, j: int,
                    asked: frozenset[str]) -> dict:
    """What features._negation_conflict found: the claim's negation of a word the window
    states plainly (evidence: that word), or the claim's word the window negates
    (evidence: the window's negation before it)."""
    w_strict, w_loose, _, w_free = negation_reach(passage[p.starts[i]:p.ends[j - 1]])
    plain = (profile.neg_strict & frozenset(p.norms[i:j])) - w_loose  # negated by the claim only
    negated = (w_strict & profile.content) - profile.neg_loose - w_free - asked  # by the window only
    out = {}
    for k, (s, e, _raw, f) in enumerate(toks):
        if f[3]:
            target = next((g[0] for _, _, _, g in toks[k + 1:k + 1 + NEG_SCOPE] if not g[4]), None)
            at = [x for x in range(i, j) if p.norms[x] == target]
            if target in plain and at:
                out[(s, e)] = (p.starts[at[0]], p.ends[at[0]])
        elif not f[4] and f[0] in negated:
            at = [x for x in range(i, j) if p.norms[x] == f[0] and any(p.negs[max(i, x - NEG_SCOPE):x])]
            if at:
                n = max(y for y in range(max(i, at[0] - NEG_SCOPE), at[0]) if p.negs[y])
                out[(s, e)] = (p.starts[n], p.ends[n])
    return out


def _polar_marks(claim: str, profile: Claim, p: Passage, i: int, j: int, support: frozenset[str],
                 conflicts: Sequence[str]) -> tuple[Mark, ...]:
    """A "Yes."/"No." answer: its polar word, when the statement it makes is contradicted
    (the window negates it otherwise) or not fully in the support."""
    first = _words(claim)[0]
    s, e = first[0], first[1]
    if "neg_conflict" in conflicts:
        negs = [k for k in range(i, j) if p.negs[k]]
        hits = [k for k in range(i, j) if p.norms[k] in profile.content]
        x = (negs or hits or [i])[0]
        return ((s, e, "contradicted", p.starts[x], p.ends[x]),)
    if profile.content - support:
        return ((s, e, "unsupported", None, None),)
    return ()


# ------------------------------------------------------------------------- spans
def _spans(claim: str, toks: list[_Token], flags: list[bool],
           contra: dict[tuple[int, int], tuple[int, int]]) -> tuple[Mark, ...]:
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
            spoken = spoken or not f[4]
        elif not f[4] and run:
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
