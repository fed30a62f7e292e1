"""The short-circuit bound for a whole batch of (claim, passage) pairs at once, in NumPy.

`unsupported_bound(profile, passage) < bound` (features.py) is what decides most pairs at
scale (~370k of ~470k at 100k chunks × 10k answers): the share of the claim's content
norms found among the passage's norms. Pair by pair that is a claim profile per claim and
a set intersection per pair in Python. Here every norm is its content id
(tasks/core/analysis.py `norm_id`, a 64-bit hash of its text); a claim is the sorted ids
of `claim_content` (the profile's `content`, without the rest of the profile); a passage
that is a chunk the corpus index holds is the ids its stored analysis gives (gathered for
the whole pass at once: no passage is tokenised), any other the ids of `passage_norms`'
set, computed once per distinct text and kept. Each pass numbers the distinct ids it
holds, makes every (passage, norm) one int64 key, and each pair's overlap is a
`searchsorted` of its claim's keys plus a `bincount` — no Python object per pair.

Identical to the pair-by-pair bound: the same two sets (same word tables; a stored
analysis is the passage's words as `passage_profile` reads them — its tests say so), the
overlap their exact intersection size (ids unique per claim and per passage), and the
share `overlap / len(content)` one IEEE float64 division of two small integers — what
Python's int / int computes — compared with the same float `bound`. (Two norms whose
64-bit ids collided would count as one: ~1e-8 at a million distinct norms.)
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from itertools import chain

import numpy as np
from ragspan.tasks.core.analysis import NORM_IDS, ChunkAnalysis, norm_id
from ragspan.tasks.core.text import norm_set
from ragspan.tasks.judges.verifier.profiles import claim_content

Item = tuple[str, Sequence[str], str, bool]  # (claim, passages, question, whole_answer)

_NONE_BELOW = np.zeros(0, dtype=bool)  # an item without passages
# Pairs per NumPy pass: bounds the temporary arrays (a pair has ~10 claim norms → ~10
# int64 keys in each of a few arrays) to a few MB, whatever the batch size.
_PAIRS_PER_PASS = 1 << 16
_NO_NORM = np.uint64(norm_id(""))  # `passage_norms` drops an empty norm: so does a stored passage


def _ids(norms) -> np.ndarray:
    """The sorted content ids of these distinct norms."""
    a = np.fromiter(map(norm_id, norms), dtype=np.uint64, count=len(norms))
    a.sort()
    return a


def _numbered(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct ids, sorted; each id's number: its place among them). By sorting:
    np.unique's hashing path for the inverse is several times slower here."""
    order = np.argsort(ids, kind="stable")
    ranked = ids[order]
    new = np.empty(len(ranked), dtype=bool)
    new[:1] = True
    np.not_equal(ranked[1:], ranked[:-1], out=new[1:])
    number = np.empty(len(ids), dtype=np.int64)
    number[order] = np.cumsum(new) - 1
    return ranked[new], number


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    keys = np.sort(keys)
    return keys[np.r_[True, keys[1:] != keys[:-1]]] if len(keys) else keys


class BulkBound:
    """The id arrays of claims and of passages tokenised here (per process), and the bound
    over a batch. Every cache is bounded: past its limit it is cleared (ids are contents,
    the same in every process and after any clear)."""

    def __init__(self, max_passages: int = 1 << 14, max_claims: int = 1 << 13) -> None:
        self.max_passages, self.max_claims = max_passages, max_claims
        self._passages: dict[str, np.ndarray] = {}
        self._claims: dict[tuple[str, str, bool], np.ndarray] = {}
        self._lock = threading.RLock()

    def cache_clear(self) -> None:
        """Forget every array (a cold process, for benchmarks)."""
        self._passages.clear()
        self._claims.clear()
        NORM_IDS.clear()

    def claim_ids(self, claim: str, question: str, whole_answer: bool) -> np.ndarray:
        """The sorted ids of the claim's content norms (empty: no content word)."""
        key = (claim, question, whole_answer)
        got = self._claims.get(key)
        if got is None:
            if len(self._claims) >= self.max_claims:
                self._claims.clear()
            got = self._claims[key] = _ids(claim_content(claim, question, whole_answer))
        return got

    def passage_ids(self, passage: str) -> np.ndarray:
        """The sorted ids of every norm of the passage (`passage_norms`' set), tokenised here."""
        got = self._passages.get(passage)
        if got is None:
            if len(self._passages) >= self.max_passages:
                self._passages.clear()
            got = self._passages[passage] = _ids(norm_set(passage))
        return got

    def _pass_ids(self, texts: list[str], analysis: ChunkAnalysis | None) -> tuple[np.ndarray, np.ndarray]:
        """(every norm id of each text one after another, each text's count): the chunk texts
        the index holds from its stored analysis, the others tokenised (`passage_ids`).
        Repeats within a text are left in (the pass's keys are made unique)."""
        rows = analysis.rows_of(texts) if analysis is not None else np.full(len(texts), -1, dtype=np.int64)
        stored = np.flatnonzero(rows >= 0)
        lengths = np.zeros(len(texts), dtype=np.int64)
        parts: list[np.ndarray] = []
        if stored.size:
            ids, counts = analysis.ids_of(rows[stored])
            lengths[stored] = counts
            parts.append(ids)
        tokenised = np.flatnonzero(rows < 0)
        arrays = [self.passage_ids(texts[k]) for k in tokenised.tolist()]
        lengths[tokenised] = [len(a) for a in arrays]
        if len(tokenised) and len(stored):  # interleave back into text order
            owner = np.repeat(np.arange(len(texts)), lengths)
            from_stored = np.isin(owner, stored)
            out = np.empty(int(lengths.sum()), dtype=np.uint64)
            out[from_stored] = parts[0]
            out[~from_stored] = np.concatenate(arrays)
            return out, lengths
        if arrays:
            parts.append(np.concatenate(arrays))
        return (parts[0] if parts else np.zeros(0, dtype=np.uint64)), lengths

    def stated(self, passages: Sequence[str], norms: Sequence[str], analysis: ChunkAnalysis | None = None
               ) -> np.ndarray:
        """Per norm, whether some of the passages has it among its norms (`passage_norms`'
        set)."""
        if not norms:
            return np.zeros(0, dtype=bool)
        with self._lock:
            known, _ = self._pass_ids(list(passages), analysis)
            known = known[known != _NO_NORM]
            wanted = np.fromiter(map(norm_id, norms), dtype=np.uint64, count=len(norms))
            return np.isin(wanted, known)

    def below(self, items: Sequence[Item], bound: float, analysis: ChunkAnalysis | None = None
              ) -> list[np.ndarray | None]:
        """Per item: None when its claim has no content word, else per passage whether
        `unsupported_bound(claim_profile(claim, question, whole_answer), passage) < bound`.
        `analysis`: the corpus index's stored analysis (the passages it holds not tokenised)."""
        with self._lock:  # judges on a thread runner share the caches
            claims = [self.claim_ids(c, q or "", w) for c, _ps, q, w in items]
            out: list[np.ndarray | None] = [None] * len(items)
            start = 0
            while start < len(items):  # a pass over items holding about _PAIRS_PER_PASS pairs
                end, pairs = start, 0
                while end < len(items) and (pairs == 0 or pairs + len(items[end][1]) <= _PAIRS_PER_PASS):
                    pairs += len(items[end][1])
                    end += 1
                self._pass(items, claims, start, end, bound, out, analysis)
                start = end
            return out

    def _pass(self, items: Sequence[Item], claims: list[np.ndarray], start: int, end: int, bound: float,
              out: list[np.ndarray | None], analysis: ChunkAnalysis | None) -> None:
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
        flat, p_len = self._pass_ids(texts, analysis)
        owner = np.repeat(np.arange(len(texts), dtype=np.int64), p_len)
        real = flat != _NO_NORM
        distinct, number = _numbered(flat[real])  # the pass's ids, numbered
        width = max(len(distinct), 1)
        # Keys of every (passage, norm), sorted and unique: passage-major, each passage's ids sorted.
        keys = _sorted_unique(owner[real] * width + number)
        # Per pair, its claim's ids: claim CSR rows repeated per passage.
        claim_arrays = [claims[k] for k in live]
        c_len = np.fromiter(map(len, claim_arrays), dtype=np.int64, count=len(claim_arrays))
        c_off = np.cumsum(c_len) - c_len
        c_all = np.concatenate(claim_arrays)
        c_at = np.minimum(np.searchsorted(distinct, c_all), max(len(distinct) - 1, 0))
        c_known = distinct[c_at] == c_all if len(distinct) else np.zeros(len(c_all), dtype=bool)
        pair_claim = np.repeat(np.arange(len(live)), per_item)
        n = c_len[pair_claim]  # content norms per pair (≥ 1)
        pair_of = np.repeat(np.arange(len(pp)), n)
        within = np.arange(len(pair_of)) - np.repeat(np.cumsum(n) - n, n)
        at = np.repeat(c_off[pair_claim], n) + within
        wanted = np.where(c_known[at], pp[pair_of] * width + c_at[at], -1)  # an id no passage has: no key
        if keys.size:
            found_at = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
            found = keys[found_at] == wanted
        else:
            found = np.zeros(wanted.shape, dtype=bool)
        overlap = np.bincount(pair_of[found], minlength=len(pp))
        below = overlap / n < bound  # float64 true division, as len(a & b) / len(a)
        ends = np.cumsum(per_item)
        for k, a, b in zip(live, ends - per_item, ends, strict=True):
            out[k] = below[a:b]


# The process's one: the caches are a property of the process, not of a model file.
BULK = BulkBound()
