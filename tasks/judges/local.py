"""The offline default judge: deterministic, no network, no key.

Decomposition: each sentence of the answer (line breaks, then sentencex) is a claim,
split further at semicolons. Judging a (claim, passage) pair:

1. the claim's content words (stopwords dropped, Snowball stems, numbers canonical);
2. every window of one or two consecutive passage sentences is scored by coverage —
   the share of the claim's content words it contains (a window's words are a subset of
   the passage's, so when the whole passage covers less than partial_threshold no window
   can reach it: the pair is `unsupported` without segmenting the passage, the cheap
   case for most retrieved chunks);
3. in the best window, the numbers and named entities of the claim must all appear, and
   negation must agree between the claim and the matched stretch of the passage;
4. `supported` when coverage ≥ partial_threshold and every check agrees (confidence =
   coverage, so diagnose's support_threshold decides how much coverage is enough);
   `partial` when the window is about the claim (coverage ≥ partial_threshold) but a
   check disagrees — the signature of a synthesis error; else `unsupported` (confidence
   = the share of the claim's content words missing from the whole passage);
5. the quote is the minimal passage substring from the first to the last matched word.
"""

from __future__ import annotations

import atexit
import multiprocessing
import threading
from bisect import bisect_left
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from functools import lru_cache

from ragspan.tasks.core.text import norm_set, sentence_spans, token_arrays, word_features
from ragspan.tasks.judges.base import (
    AnswerItem,
    ClaimText,
    JudgeFailure,
    JudgeItem,
    JudgeSpec,
    JudgeStats,
    Verdict,
    answer_items,
    judge_items,
)

# The local judge's identity in cache keys and manifests: bump the version whenever a
# change here can change a verdict.
LOCAL_JUDGE_MODEL = "ragspan-lexical"
LOCAL_JUDGE_VERSION = "local-3"
# judge.support_threshold "auto": the coverage a supported verdict needs to count.
LOCAL_SUPPORT_THRESHOLD = 0.75

# Negation words up to this many tokens before the first matched word still belong to
# the matched stretch ("No refunds are issued ..." negates "refunds are issued").
_NEGATION_LOOKBEHIND = 3
# ... and up to this many after the last one ("... Now I am neither.").
_NEGATION_LOOKAHEAD = 2


@dataclass(frozen=True, slots=True)
class _ClaimProfile:
    content: frozenset[str]
    numbers: frozenset[str]
    entities: frozenset[str]
    negated: bool


@dataclass(frozen=True, slots=True)
class _Passage:
    starts: tuple[int, ...]  # per token: raw start, end, norm, is it a negation
    ends: tuple[int, ...]
    tnorms: tuple[str, ...]
    negs: tuple[bool, ...]
    windows: tuple[tuple[int, int], ...]  # token ranges [i, j): each sentence, then each pair
    singles: int  # how many of `windows` are single sentences
    norms: tuple[frozenset[str], ...]  # the set of token norms of each window


@lru_cache(maxsize=65536)  # each claim is judged twice (retrieved chunks, then corpus hits)
def claim_profile(claim: str) -> _ClaimProfile | None:
    words = word_features(claim)  # (raw, (norm, is_number, is_entity, is_negation, is_stop))
    content = [(i, raw, f) for i, (raw, f) in enumerate(words) if not f[4]]
    if not content:
        return None
    # A claim's first word is capitalised by grammar, not because it is a name.
    entities = {f[0] for i, raw, f in content if f[2] and (i > 0 or raw.isupper())}
    return _ClaimProfile(
        content=frozenset(f[0] for _, _, f in content),
        numbers=frozenset(f[0] for _, _, f in content if f[1]),
        entities=frozenset(entities),
        negated=any(f[3] for _, f in words),
    )


# Per-passage caches, bounded: a chunk is judged against every claim whose question
# retrieved it or whose corpus search hit it, across shards (popular chunks recur). At
# 100k chunks × 10k answers these sizes hold ~0.7 GB; 4× smaller ones saved that memory
# but cost ~4 s (+25 %) of judging (BENCHMARKS.md).
@lru_cache(maxsize=32768)
def _passage(text: str) -> _Passage:
    starts, ends, tnorms, negs = token_arrays(text)
    bounds: list[tuple[int, int]] = []
    for s, e in sentence_spans(text):
        i = bisect_left(starts, s)
        j = bisect_left(starts, e)
        if j > i:
            bounds.append((i, j))
    windows = tuple(bounds) + tuple((bounds[k][0], bounds[k + 1][1]) for k in range(len(bounds) - 1))
    sets = [frozenset(tnorms[i:j]) for i, j in bounds]
    norms = tuple(sets) + tuple(sets[k] | sets[k + 1] if bounds[k][1] == bounds[k + 1][0]
                                else frozenset(tnorms[bounds[k][0]:bounds[k + 1][1]]) for k in range(len(sets) - 1))
    return _Passage(starts=tuple(starts), ends=tuple(ends), tnorms=tuple(tnorms), negs=tuple(negs),
                    windows=windows, singles=len(bounds), norms=norms)


def judge_pair(profile: _ClaimProfile, passage: str, partial_threshold: float) -> Verdict:
    """The local verdict for one claim profile against one passage."""
    overall = len(profile.content & _norm_set(passage)) / len(profile.content)
    if overall < partial_threshold:  # no window can reach the threshold (docstring, 2.)
        return _unsupported(overall)
    p = _passage(passage)
    coverages = [len(profile.content & norms) / len(profile.content) for norms in p.norms]
    best: tuple[tuple[bool, float, int], int] | None = None
    for w, coverage in enumerate(coverages):
        if coverage < partial_threshold:
            continue
        if w >= p.singles:  # a two-sentence window counts only if it adds words the claim needs:
            k = w - p.singles  # otherwise its second sentence could only smuggle in agreement
            if coverage <= max(coverages[k], coverages[k + 1]):
                continue
        agrees = not _disagreements(profile, p, w)
        key = (agrees, coverage, -(p.windows[w][1] - p.windows[w][0]))
        if best is None or key > best[0]:
            best = (key, w)
    if best is None:
        return _unsupported(overall)
    (agrees, coverage, _), w = best
    start, end = _matched_stretch(profile, p, w)
    problems = _disagreements(profile, p, w)
    return Verdict(
        verdict="supported" if agrees else "partial",
        confidence=round(coverage, 4),
        quote=passage[start:end],
        quote_start=start,
        reason=f"coverage {coverage:.2f}" + (f"; {'; '.join(problems)}" if problems else ""),
    )


@lru_cache(maxsize=4096)  # coverages are small fractions (k / content words): few values
def _unsupported(coverage: float) -> Verdict:
    """Verdicts are frozen, so one instance per coverage serves every unsupported pair
    (most pairs; building a pydantic model each time was a third of the judge's time)."""
    return Verdict(verdict="unsupported", confidence=round(1 - coverage, 4), reason=f"passage coverage {coverage:.2f}")


@lru_cache(maxsize=65536)
def _norm_set(text: str) -> frozenset[str]:
    return norm_set(text)


def _matched_stretch(profile: _ClaimProfile, p: _Passage, w: int) -> tuple[int, int]:
    i, j = p.windows[w]
    content, tn = profile.content, p.tnorms
    first = next(k for k in range(i, j) if tn[k] in content)
    last = next(k for k in range(j - 1, i - 1, -1) if tn[k] in content)
    return p.starts[first], p.ends[last]


def _disagreements(profile: _ClaimProfile, p: _Passage, w: int) -> list[str]:
    norms = p.norms[w]
    problems = []
    missing_numbers = profile.numbers - norms
    if missing_numbers:
        problems.append("number not in passage: " + ", ".join(sorted(missing_numbers)))
    missing_entities = profile.entities - norms
    if missing_entities:
        problems.append("name not in passage: " + ", ".join(sorted(missing_entities)))
    i, j = p.windows[w]
    hit_idx = [k for k in range(i, j) if p.tnorms[k] in profile.content]
    lo = max(i, hit_idx[0] - _NEGATION_LOOKBEHIND) if hit_idx else i
    hi = min(j, hit_idx[-1] + 1 + _NEGATION_LOOKAHEAD) if hit_idx else j
    passage_negated = any(p.negs[lo:hi])
    if passage_negated != profile.negated:
        problems.append("negation differs" + (" (claim negated)" if profile.negated else " (passage negated)"))
    return problems


def split_claims(answer: str) -> list[ClaimText]:
    """Sentences of the answer, split again at semicolons, with exact answer offsets."""
    claims: list[ClaimText] = []
    for s, e in sentence_spans(answer):
        piece_start = s
        for k in range(s, e + 1):
            if k == e or answer[k] == ";":
                a, b = piece_start, k
                while a < b and answer[a].isspace():
                    a += 1
                while b > a and answer[b - 1].isspace():
                    b -= 1
                if b > a:
                    claims.append(ClaimText(text=answer[a:b], start=a, end=b))
                piece_start = k + 1
    return claims


class LocalJudge:
    """Lexical judge (see the module docstring). Pure and deterministic."""

    def __init__(self, spec: JudgeSpec) -> None:
        self.spec = spec
        self.stats = JudgeStats()

    def decompose(self, answer: str, question: str = "") -> list[ClaimText] | JudgeFailure:
        self.stats.calls += 1
        return split_claims(answer)

    def judge(self, claim: str, passages: Sequence[str], question: str = "") -> list[Verdict | JudgeFailure]:
        self.stats.calls += 1
        profile = claim_profile(claim)
        if profile is None:
            failure = JudgeFailure(kind="no_content", detail="the claim has no words to check")
            return [failure for _ in passages]
        return [judge_pair(profile, p, self.spec.partial_threshold) for p in passages]

    def decompose_many(self, items: Sequence[AnswerItem | tuple | str]) -> list[list[ClaimText] | JudgeFailure]:
        return [self.decompose(a.answer, a.question) for a in answer_items(items)]

    def judge_many(self, items: Sequence[JudgeItem | tuple]) -> list[list[Verdict | JudgeFailure]]:
        items = judge_items(items)
        pool = _pool_for(sum(len(i.passages) for i in items))
        if pool is None:
            return [self.judge(*item) for item in items]
        threshold, step = self.spec.partial_threshold, max(1, len(items) // (4 * _processes))
        batches = [list(items[i:i + step]) for i in range(0, len(items), step)]
        try:
            parts = list(pool.map(_judge_rows, [threshold] * len(batches), batches))
        except (BrokenProcessPool, OSError):  # workers cannot start or died: judge here instead
            set_processes(1)
            return [self.judge(*item) for item in items]
        self.stats.calls += len(items)
        return [[_from_row(r) for r in rows] for part in parts for rows in part]


# --------------------------------------------------------------------------- worker processes
# The local judge is pure Python: threads share one GIL, so on its own it uses one core.
# With `pipeline.judge_processes` > 1 (set by the flow, tasks.config) a big judge_many is
# split over that many worker processes (spawned once, reused; each keeps its own caches).
# Verdicts are pure functions of (claim, passage, threshold): identical either way.
# Dask workers and every other process keep the default, 1 = in-process.

MIN_POOLED_PAIRS = 2000  # below this, shipping the work costs more than it saves
_processes = 1
_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()


def set_processes(n: int) -> None:
    """How many worker processes a big judge_many may use (1 = none)."""
    global _processes, _pool
    with _pool_lock:
        if n != _processes and _pool is not None:
            _pool.shutdown(wait=False, cancel_futures=True)
            _pool = None
        _processes = max(1, n)


def _pool_for(pairs: int) -> ProcessPoolExecutor | None:
    global _pool
    if _processes <= 1 or pairs < MIN_POOLED_PAIRS:
        return None
    with _pool_lock:
        if _pool is None:
            # spawn, not fork: the parent runs Prefect's threads, and a forked child could
            # inherit a lock one of them held.
            _pool = ProcessPoolExecutor(_processes, mp_context=multiprocessing.get_context("spawn"))
            atexit.register(_pool.shutdown, wait=False, cancel_futures=True)
        return _pool


_Row = tuple[str, float | None, str | None, int | None, str]


def _judge_rows(partial_threshold: float, items: list[JudgeItem]) -> list[list[_Row]]:
    """In a worker: verdicts as plain tuples (cheap to send back)."""
    out = []
    for claim, passages, _question in items:
        profile = claim_profile(claim)
        if profile is None:
            out.append([("!no_content", None, None, None, "the claim has no words to check")] * len(passages))
            continue
        rows = []
        for p in passages:
            v = judge_pair(profile, p, partial_threshold)
            rows.append((v.verdict, v.confidence, v.quote, v.quote_start, v.reason))
        out.append(rows)
    return out


def _from_row(row: _Row) -> Verdict | JudgeFailure:
    verdict, confidence, quote, quote_start, reason = row
    if verdict.startswith("!"):
        return JudgeFailure(kind=verdict[1:], detail=reason)
    if verdict == "unsupported":
        return _unsupported_from(confidence, reason)
    return Verdict(verdict=verdict, confidence=confidence, quote=quote, quote_start=quote_start, reason=reason)


@lru_cache(maxsize=4096)
def _unsupported_from(confidence: float, reason: str) -> Verdict:
    return Verdict(verdict="unsupported", confidence=confidence, reason=reason)
