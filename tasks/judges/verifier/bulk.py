"""The short-circuit bound for a whole batch of (claim, passage) pairs at once, in NumPy.

`unsupported_bound(profile, passage) < bound` (features.py) is what decides most pairs at
scale (~370k of ~470k at 100k chunks × 10k answers): the share of the claim's content
norms found among the passage's norms. Pair by pair that is a claim profile per claim and
a set intersection per pair in Python. Here each norm gets an integer id; a claim is the
sorted ids of `claim_content` (the profile's `content`, without the rest of the profile)
and a passage the sorted ids of `passage_norms`' set, computed once per distinct text and
kept; every (passage, norm) of a batch becomes one int64 key, and each pair's overlap is
a `searchsorted` of its claim's keys plus a `bincount` — no Python object per pair.

Identical to the pair-by-pair bound: the same two sets (same functions, same word
tables), the overlap their exact intersection size (ids are unique per claim and per
passage), and the share `overlap / len(content)` one IEEE float64 division of two small
integers — what Python's int / int computes — compared with the same float `bound`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from itertools import chain

import numpy as np
from ragspan.tasks.core.text import norm_set
from ragspan.tasks.judges.verifier.profiles import claim_content

Item = tuple[str, Sequence[str], str, bool]  # (claim, passages, question, whole_answer)

_NONE_BELOW = np.zeros(0, dtype=bool)  # an item without passages
# Pairs per NumPy pass: bounds the temporary arrays (a pair has ~10 claim norms → ~10
# int64 keys in each of a few arrays) to a few MB, whatever the batch size.
_PAIRS_PER_PASS = 1 << 16


class _Ids(dict):
    """norm -> its integer id, assigned on first sight."""

    def __missing__(self, norm: str) -> int:
        value = self[norm] = len(self)
        return value


class BulkBound:
    """Norm ids and the id arrays of claims and passages seen (per process), and the bound
    over a batch. Every cache is bounded: past its limit it is cleared, and the ids with it
    when there are too many norms (ids mean nothing across a clear, so all go together,
    between batches only)."""

    def __init__(self, max_norms: int = 1 << 20, max_passages: int = 1 << 14, max_claims: int = 1 << 13) -> None:
        self.max_norms, self.max_passages, self.max_claims = max_norms, max_passages, max_claims
        self.ids = _Ids()
        self._passages: dict[str, np.ndarray] = {}
        self._claims: dict[tuple[str, str, bool], np.ndarray] = {}
        self._lock = threading.RLock()

    def cache_clear(self) -> None:
        """Forget every id and array (a cold process, for benchmarks; or too many norms)."""
        self.ids.clear()
        self._passages.clear()
        self._claims.clear()

    def _sorted_ids(self, norms: frozenset[str]) -> np.ndarray:
        a = np.fromiter(map(self.ids.__getitem__, norms), dtype=np.int64, count=len(norms))
        a.sort()
        return a

    def claim_ids(self, claim: str, question: str, whole_answer: bool) -> np.ndarray:
        """The sorted ids of the claim's content norms (empty: no content word)."""
        key = (claim, question, whole_answer)
        got = self._claims.get(key)
        if got is None:
            if len(self._claims) >= self.max_claims:
                self._claims.clear()
            got = self._claims[key] = self._sorted_ids(claim_content(claim, question, whole_answer))
        return got

    def passage_ids(self, passage: str) -> np.ndarray:
        """The sorted ids of every norm of the passage (`passage_norms`' set)."""
        got = self._passages.get(passage)
        if got is None:
            if len(self._passages) >= self.max_passages:
                self._passages.clear()
            got = self._passages[passage] = self._sorted_ids(norm_set(passage))
        return got

    def stated(self, passages: Sequence[str], norms: Sequence[str]) -> np.ndarray:
        """Per norm, whether some of the passages has it among its norms (`passage_norms`'
        set), from the kept id arrays: no passage is tokenised twice."""
        if not norms:
            return np.zeros(0, dtype=bool)
        with self._lock:
            self._forget_if_full()
            arrays = [self.passage_ids(p) for p in passages]
            known = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
            # a norm never seen has no id, hence is in no passage: -1 matches nothing
            wanted = np.fromiter((self.ids.get(n, -1) for n in norms), dtype=np.int64, count=len(norms))
            return np.isin(wanted, known)

    def below(self, items: Sequence[Item], bound: float) -> list[np.ndarray | None]:
        """Per item: None when its claim has no content word, else per passage whether
        `unsupported_bound(claim_profile(claim, question, whole_answer), passage) < bound`."""
        # One batch at a time: judges on a thread runner share this object, and an id
        # handed out twice, or cleared mid-batch, would mix two norms up.
        with self._lock:
            return self._below(items, bound)

    def _forget_if_full(self) -> None:
        """Between batches only (the caller holds the lock): too many norms, start afresh."""
        if len(self.ids) > self.max_norms:
            self.cache_clear()

    def _below(self, items: Sequence[Item], bound: float) -> list[np.ndarray | None]:
        self._forget_if_full()
        claims = [self.claim_ids(c, q or "", w) for c, _ps, q, w in items]
        out: list[np.ndarray | None] = [None] * len(items)
        start = 0
        while start < len(items):  # a pass over items holding about _PAIRS_PER_PASS pairs
            end, pairs = start, 0
            while end < len(items) and (pairs == 0 or pairs + len(items[end][1]) <= _PAIRS_PER_PASS):
                pairs += len(items[end][1])
                end += 1
            self._pass(items, claims, start, end, bound, out)
            start = end
        return out

    def _pass(self, items: Sequence[Item], claims: list[np.ndarray], start: int, end: int, bound: float,
              out: list[np.ndarray | None]) -> None:
        live = [k for k in range(start, end) if claims[k].size]
        for k in live:
            out[k] = _NONE_BELOW  # replaced below for an item with passages
        live = [k for k in live if items[k][1]]
        if not live:
            return
        # Passages of the pass: one local index per distinct text.
        local: dict[str, int] = {}
        texts: list[str] = []
        for k in live:
            for p in items[k][1]:
                if p not in local:
                    local[p] = len(texts)
                    texts.append(p)
        pp = np.fromiter(chain.from_iterable(map(local.__getitem__, items[k][1]) for k in live), dtype=np.int64)
        per_item = np.fromiter((len(items[k][1]) for k in live), dtype=np.int64, count=len(live))
        passage_arrays = [self.passage_ids(t) for t in texts]
        claim_arrays = [claims[k] for k in live]
        width = len(self.ids)  # every id of the pass is below it: (passage, id) -> passage * width + id
        # Keys of every (passage, norm), sorted: passage-major, each passage's ids sorted.
        p_len = np.fromiter(map(len, passage_arrays), dtype=np.int64, count=len(passage_arrays))
        keys = np.repeat(np.arange(len(texts), dtype=np.int64) * width, p_len) + np.concatenate(passage_arrays)
        # Per pair, its claim's ids: claim CSR rows repeated per passage.
        c_len = np.fromiter(map(len, claim_arrays), dtype=np.int64, count=len(claim_arrays))
        c_off = np.cumsum(c_len) - c_len
        c_all = np.concatenate(claim_arrays)
        pair_claim = np.repeat(np.arange(len(live)), per_item)
        n = c_len[pair_claim]  # content norms per pair (≥ 1)
        pair_of = np.repeat(np.arange(len(pp)), n)
        within = np.arange(len(pair_of)) - np.repeat(np.cumsum(n) - n, n)
        wanted = pp[pair_of] * width + c_all[np.repeat(c_off[pair_claim], n) + within]
        if keys.size:
            at = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
            found = keys[at] == wanted
        else:
            found = np.zeros(wanted.shape, dtype=bool)
        overlap = np.bincount(pair_of[found], minlength=len(pp))
        below = overlap / n < bound  # float64 true division, as len(a & b) / len(a)
        ends = np.cumsum(per_item)
        for k, a, b in zip(live, ends - per_item, ends, strict=True):
            out[k] = below[a:b]


# The process's one: ids are a property of the process, not of a model file.
BULK = BulkBound()
