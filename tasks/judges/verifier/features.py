"""Features of a (question, claim, passage) triple for the learned local judge.

Pure Python; deterministic: every float sum over a set of words is math.fsum (exactly
rounded, so independent of set iteration order, which changes with PYTHONHASHSEED).
The claim's and the passage's profiles (words, weights, sentences) are profiles.py's;
the conflict features are conflicts.py's detectors, run in a window about the claim.

- window: a run of 1..3 consecutive passage sentences (tasks/core/text.py sentence_spans).
- THE window (quoted, and used by every "_w" feature) is the best 1-2 sentence window:
  max weighted coverage, ties -> fewer tokens, then earliest. The quote is the passage
  substring from the first to the last claim word matched in it.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass

from ragspan.tasks.judges.verifier.conflicts import (
    NAME,
    NEGATION,
    NUMBER,
    UNIT,
    Clash,
    names_found,
    window_clashes,
)
from ragspan.tasks.judges.verifier.profiles import (
    Claim,
    Passage,
    claim_profile,
    passage_norms,
    passage_profile,
    trigrams,
)

# ---------------------------------------------------------------------------- features
FEATURES: tuple[str, ...] = (
    "cov_all",       # share of claim content words anywhere in the passage (topicality)
    "wcov_all",      # the same, IDF-weighted (rare words matter more)
    "new_cov_all",   # share of the words the claim adds beyond its question found in the passage
    "cov_w1",        # best single-sentence coverage (local-3's unit)
    "wcov_w",        # weighted coverage of THE window (best 1-2 sentences)
    "cov_w",         # unweighted coverage of THE window
    "wcov_w3",       # best weighted coverage of 1-3 consecutive sentences
    "wcov_u3",       # weighted coverage of a greedy union of 3 sentences anywhere (spread support)
    "wcov_u5",       # ... of 5 sentences
    "new_wcov_u3",   # weighted coverage over words beyond the question, in the 3-sentence union
    "soft_w",        # coverage of THE window counting 5-letter prefix matches too (paraphrase)
    "bigram_w",      # share of claim content bigrams adjacent (in content order) in THE window
    "bigram_all",    # ... anywhere in the passage
    "lcs_w",         # longest common subsequence of content norms with THE window / claim words
    "tri_w",         # char-trigram containment of the claim's norm string in THE window's
    "miss_max",      # weight of the most informative claim word absent from the 5-sentence union /6
    "miss_n",        # how many claim content words are absent from the 5-sentence union (cap 8)/8
    "num_n",         # claim numbers (cap 3)/3
    "num_found_w",   # share of claim numbers in THE window (1 when none)
    "num_conflict",  # a claim number is missing from THE window, which has another number
    "year_missing",  # a claim year (1500-2099) is missing from the 3-sentence union
    "ent_found_w",   # share of claim names/codes in THE window (1 when none)
    "ent_found_all", # share of claim names/codes anywhere in the passage (1 when none)
    "neg_mismatch",  # negation differs between the claim and THE window's matched stretch
    "len_claim",     # log(1 + claim content words) / 3: long claims are rarely fully supported
    "clause_min",    # lowest weighted coverage (5-sentence union) over the claim's clauses (split at , ; ( ) and relative words)
    "miss_wsum",     # summed weight of claim words absent from the 5-sentence union / 12 (cap 1)
    "top3_u3",       # share of the claim's 3 most informative words found in the 3-sentence union
    "spread",        # (sentences the greedy 3-union needed - 1) / 2: support scattered over the page
    "swap_num",      # cov_w * (1 - num_found_w): the window is about the claim but a number is not in it
    "swap_ent",      # cov_w * (1 - ent_found_all): about the claim but a name appears nowhere in the passage
    "spec_u3",       # coverage in the 3-union, each word weighted by weight * log(1 + sentences / sentences holding it): topic words every sentence repeats count little
    "density_w",     # matched claim words / tokens of the quoted stretch of THE window (tight match)
    "len_passage",   # log(1 + passage sentences) / 5: on a long page words co-occur by chance
    "clause_min_s",  # lowest over the claim's clauses of its best single-sentence weighted coverage (each clause stated somewhere)
    "soft_u3",       # weighted coverage of the 3-union counting 5-letter-prefix matches of missing words too
    # local-5: what the claim adds to its question, support assembled over several
    # sentences, and conflicts (the window states the claim with one thing changed).
    "new_cov_w",     # weighted share of the words the claim adds to its question in THE window
    "cov_fit",       # weighted coverage of a greedy union of as many sentences as the claim has clauses (cap 5)
    "num_found_all", # share of the claim's own numbers anywhere in the passage (1 when none)
    "ent_new_all",   # share of the claim's own names anywhere in the passage, any spelling (1 when none)
    "num_new_conflict",  # a number of the claim's own is not in THE window (nor within 5 %), which holds another
    "unit_conflict", # THE window gives a number of the claim with another unit
    "ent_conflict",  # a name of the claim's own is not in THE window, which holds another name and most of the claim
    "neg_conflict",  # a negation of the claim is absent where the window states the same words, or the reverse
    "from_question", # share of the claim's content words that come from its question
    # local-5.1: positive evidence (issue 41): what the claim adds that the passage never states
    "added",         # the claim's own numbers, names and rare words (weight >= ADDED_RARITY) absent from the passage (cap 8)/8
)

# A content word at least this rare (7 - Zipf frequency: Zipf <= 3.5, about 3 uses in a
# million words) is content a passage must state: a paraphrase rewords common words, not
# these. Chosen on the tune half of RAGTruth dev (benchmarks/ragtruth --split) among 3.0,
# 3.5, 4.0, 4.5 and names and numbers alone.
ADDED_RARITY = 3.5


def _added(claim: Claim, present: frozenset[str]) -> float:
    """The `added` feature. A "Yes."/"No." or short answer judged as the statement its
    question makes is never a paraphrase (1.0): the relation the question asks about is
    what must be found, and it is the question's words, not the answer's. Nor is a
    conversational claim — a question, an exclamation, or one in the first person ("i do
    too. it's great exercise!"): what it adds is a stance or an experience in common words,
    which the passage's words cannot confirm (dialogue responses, leave one dataset out:
    0.703 → 0.786 balanced accuracy with this, 0.814 without the rule)."""
    if added_always(claim):
        return 1.0
    return min(len(added_words(claim, present)), 8) / 8


def added_always(claim: Claim) -> bool:
    """Whether the claim always adds what no passage's words can state (`_added`): a polar
    or short answer judged with its question, or a conversational claim (one with a word of
    profiles.SPEAKER). Decided once per claim, in its profile."""
    return claim.always_adds


# Ordinals are numbers a paraphrase keeps: "the fourth largest lake" against a passage that
# never ranks it adds a rank ("first" and "second" left out: they also mean "initially"
# and a unit of time, which paraphrase rewords).
_ORDINALS = frozenset(["third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh",
                       "twelfth", "twentieth", "hundredth", "thousandth"])
_ORDINAL_DIGITS = re.compile(r"\d+(?:st|nd|rd|th)")


def _is_ordinal(norm: str) -> bool:
    return norm in _ORDINALS or _ORDINAL_DIGITS.fullmatch(norm) is not None


def added_words(claim: Claim, present: frozenset[str]) -> frozenset[str]:
    """The claim's own content (not from its question) that a passage whose norms are
    `present` never states: its numbers (ordinals too), names, and words rarer than
    ADDED_RARITY. Normalised as every word is (stems, case, numbers by value)."""
    return frozenset(w for w in claim.new - present
                     if w in claim.numbers or w in claim.entities or claim.weights[w] >= ADDED_RARITY
                     or _is_ordinal(w))


@dataclass(frozen=True, slots=True)
class PairResult:
    features: list[float]
    quote_start: int | None
    quote_end: int | None
    window: tuple[int, int] | None  # token range of THE window
    # the claim's words in the sentences that best cover it (as many as it has clauses):
    # support assembled over the page, which answer spans count as found
    fit: frozenset[str] = frozenset()
    window_norms: frozenset[str] = frozenset()  # every norm of THE window
    # what the conflict features found, located (conflicts.py): answer spans mark them
    clashes: tuple[Clash, ...] = ()
    passage_norms: frozenset[str] = frozenset()  # every norm of the passage


def _wcov(c: Claim, present) -> float:
    tot = c.weight_sum
    return math.fsum(map(c.weights.__getitem__, c.content & present)) / tot


def _lcs(a: tuple[str, ...], b: list[str]) -> int:
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for k, y in enumerate(b):
            cur.append(prev[k] + 1 if x == y else max(prev[k + 1], cur[k]))
        prev = cur
    return prev[-1]


def _wcov_sub(c: Claim, words: frozenset[str], present: frozenset[str]) -> float:
    weight_of = c.weights.__getitem__
    tot = math.fsum(map(weight_of, words))
    return math.fsum(map(weight_of, words & present)) / tot if tot else 1.0


def _greedy_union(c: Claim, sets: tuple[frozenset[str], ...], k: int, cand: list[int]) -> frozenset[str]:
    return _greedy_union_n(c, sets, k, cand)[0]


def _greedy_union_n(c: Claim, sets: tuple[frozenset[str], ...], k: int, cand: list[int]) -> tuple[frozenset[str], int]:
    """Greedy union of up to k sentences maximising weighted coverage; (covered words, sentences used)."""
    covered: set[str] = set()
    used = 0
    weight_of = c.weights.__getitem__
    for _ in range(k):
        best, gain = -1, 0.0
        for s in cand:
            g = math.fsum(map(weight_of, (c.content & sets[s]) - covered))
            if g > gain:
                best, gain = s, g
        if best < 0:
            break
        covered |= c.content & sets[best]
        used += 1
    return frozenset(covered), used


_LOOKBEHIND, _LOOKAHEAD = 3, 2


def unsupported_bound(claim: Claim, passage: str, profile: Passage | None = None) -> float:
    """Share of claim content words anywhere in the passage (cov_all), the short-circuit.
    `profile`: the passage's profile when the caller has it (its `all_norms` is
    `passage_norms`' set: the same words, looked up in the same word table)."""
    norms = profile.all_norms if profile is not None else passage_norms(passage)
    return len(claim.content & norms) / len(claim.content)


# What the local judge reads besides its model's features: `decide`'s rules, the reasons
# and answer spans (verifier/__init__.py, marks.py).
RULE_FEATURES = frozenset(["wcov_w", "cov_w", "cov_fit", "new_wcov_u3", "from_question", "num_new_conflict",
                           "unit_conflict", "ent_conflict", "neg_conflict", "added"])
# The features `pair_features` computes with `full=False`: local-5's and the rules'.
CORE_FEATURES = RULE_FEATURES | {"cov_all", "new_cov_all", "new_cov_w", "num_found_all", "ent_new_all", "len_claim",
                                 "cov_w1", "wcov_w3"}


def pair_features(claim: Claim, passage: str, full: bool = True, profile: Passage | None = None) -> PairResult:
    """Every feature of FEATURES for one (profiled claim, passage), and the quote. With
    `full=False` only CORE_FEATURES (the others are 0.0): a model that reads no other
    cannot tell the difference, and the rest (for the benchmarks and local-4) are two
    thirds of a pair's cost. `profile`: the passage's profile when the caller has it."""
    p = profile or passage_profile(passage)
    C = claim.content
    n = len(C)
    allp = p.all_norms
    cov_all = len(C & allp) / n
    new_cov_all = len(claim.new & allp) / len(claim.new)
    ns = len(p.sents)
    hits = [C & s for s in p.sent_sets]
    cand = [k for k in range(ns) if hits[k]]
    wsum = claim.weight_sum

    cov_w1 = max((len(h) / n for h in hits), default=0.0)
    # THE window: best 1-2 sentences
    best = (-1.0, 0, 0)  # (wcov, -tokens, -start) maximised
    bw: tuple[int, int] | None = None
    bset: frozenset[str] = frozenset()
    wcov_w3 = 0.0
    weight_of = claim.weights.__getitem__
    for k in cand:
        for span in (1, 2, 3):
            if k + span > ns:
                break
            if span == 1:
                hs = hits[k]
                grown = True
            else:
                wider = hs | hits[k + span - 1]
                grown = len(wider) != len(hs)
                hs = wider
            if grown:  # (a sentence that adds no claim word leaves the sum as it was)
                wc = math.fsum(map(weight_of, hs)) / wsum
            if span == 3:
                wcov_w3 = max(wcov_w3, wc)
                continue
            wcov_w3 = max(wcov_w3, wc)
            i, j = p.sents[k][0], p.sents[k + span - 1][1]
            key = (wc, -(j - i), -i)
            if key > best:
                best, bw, bset = key, (i, j), hs
    # windows starting at a sentence without hits but whose neighbour hits are covered by
    # starting at the neighbour itself (a window's hits = union of its sentences' hits).
    if bw is None:
        feats = dict.fromkeys(FEATURES, 0.0)
        feats.update(cov_all=cov_all, wcov_all=_wcov(claim, allp), new_cov_all=new_cov_all,
                     num_n=min(len(claim.numbers), 3) / 3, num_found_w=0.0 if claim.numbers else 1.0,
                     ent_found_w=0.0 if claim.entities else 1.0,
                     ent_found_all=(len(claim.entities & allp) / len(claim.entities)) if claim.entities else 1.0,
                     miss_max=max(claim.weights.values()) / 6, miss_n=min(n, 8) / 8,
                     year_missing=float(bool(claim.years)),
                     len_claim=math.log1p(n) / 3,
                     miss_wsum=min(1.0, claim.weight_sum / 12),
                     len_passage=math.log1p(len(p.sents)) / 5,
                     num_found_all=_share(claim.new_numbers, allp),
                     ent_new_all=names_found(claim, allp, passage),
                     from_question=1 - len(claim.new) / n,
                     added=_added(claim, allp))
        return PairResult([feats[f] for f in FEATURES], None, None, None, passage_norms=allp)
    i, j = bw
    wset = frozenset(p.norms[i:j])
    wcov_w = best[0]
    u3, n_used = _greedy_union_n(claim, p.sent_sets, 3, cand)
    new_tot = claim.new_weight_sum
    hit_idx = [k for k in range(i, j) if p.norms[k] in C]  # the quote: first to last claim word
    first, last = hit_idx[0], hit_idx[-1]
    fit = _greedy_union(claim, p.sent_sets, min(5, max(1, len(claim.clauses))), cand)
    # The window states the claim apart from what may have been changed (its own names
    # and numbers): only then is a difference in them a conflict, not another topic.
    changeable = claim.capitalised | claim.new_numbers | {q.unit for q in claim.quantities}
    about = _wcov_sub(claim, C - changeable, wset) >= STATES
    clashes = window_clashes(claim, p, passage, i, j) if about else ()
    found = {c.kind for c in clashes}
    feats = {
        "new_cov_w": _wcov_sub(claim, claim.new, wset),
        "cov_fit": max(wcov_w, _wcov(claim, fit)),
        "num_found_all": _share(claim.new_numbers, allp),
        "ent_new_all": names_found(claim, allp, passage),
        "num_new_conflict": float(NUMBER in found),
        "unit_conflict": float(UNIT in found),
        "ent_conflict": float(NAME in found),
        "neg_conflict": float(NEGATION in found),
        "from_question": 1 - len(claim.new) / n,
        "cov_all": cov_all, "new_cov_all": new_cov_all, "cov_w1": cov_w1,
        "wcov_w": wcov_w, "cov_w": len(bset) / n, "wcov_w3": wcov_w3,
        "new_wcov_u3": math.fsum(map(weight_of, claim.new & u3)) / new_tot,
        "len_claim": math.log1p(n) / 3,
        "added": _added(claim, allp),
    }
    if full:
        feats.update(_other_features(claim, p, hits, cand, bw, bset, u3, n_used, hit_idx))
    return PairResult([feats.get(f, 0.0) for f in FEATURES], p.starts[first], p.ends[last], bw, fit, wset, clashes,
                      allp)


def _other_features(claim: Claim, p: Passage, hits: list[frozenset[str]], cand: list[int], window: tuple[int, int],
                    bset: frozenset[str], u3: frozenset[str], n_used: int, hit_idx: list[int]) -> dict[str, float]:
    """The features of FEATURES outside CORE_FEATURES (see pair_features)."""
    C = claim.content
    n = len(C)
    i, j = window
    allp = p.all_norms
    ns = len(p.sents)
    wnorms = p.norms[i:j]
    wset = frozenset(wnorms)
    cov_w = len(bset) / n
    u5 = _greedy_union(claim, p.sent_sets, 5, cand) if len(cand) > 3 else u3
    # soft: unmatched claim words matching a window content word on the first 5 letters
    missing_w = C - wset
    if missing_w:
        pref = {w[:5] for w, c in zip(wnorms, p.content[i:j]) if c and len(w) >= 5}
        soft_extra = sum(1 for w in missing_w if len(w) >= 5 and w[:5] in pref)
    else:
        soft_extra = 0
    # bigrams over the content sequence
    cbig = {(a, b) for a, b in zip(claim.seq, claim.seq[1:])}
    wcontent = [w for w, c in zip(wnorms, p.content[i:j]) if c]
    if cbig:
        wbig = set(itertools.pairwise(wcontent))
        bigram_w = len(cbig & wbig) / len(cbig)
        allc = [w for w, c in zip(p.norms, p.content) if c]
        abig = set(itertools.pairwise(allc))
        bigram_all = len(cbig & abig) / len(cbig)
    else:
        bigram_w = bigram_all = cov_w
    miss = C - u5
    nums = claim.numbers
    num_found_w = len(nums & wset) / len(nums) if nums else 1.0
    ents = claim.entities
    ent_found_all = len(ents & allp) / len(ents) if ents else 1.0
    # negation in the matched stretch
    first, last = hit_idx[0], hit_idx[-1]
    lo, hi = max(i, first - _LOOKBEHIND), min(j, last + 1 + _LOOKAHEAD)
    miss3 = C - u3
    if miss3:
        sents3 = [k for k in cand if claim.content & p.sent_sets[k] & u3]
        pref3 = {w[:5] for k in sents3 for w in p.sent_sets[k] if len(w) >= 5}
        soft3 = u3 | {w for w in miss3 if len(w) >= 5 and w[:5] in pref3}
    else:
        soft3 = u3
    sdf = {w: sum(1 for h in hits if w in h) for w in C}
    claim_trigrams = trigrams(claim.seq)  # (only this feature reads them: not kept in every claim's profile)
    spec = {w: claim.weights[w] * math.log1p(ns / max(1, sdf[w])) for w in C}
    return {
        "wcov_all": _wcov(claim, allp), "wcov_u3": _wcov(claim, u3), "wcov_u5": _wcov(claim, u5),
        "soft_w": (len(bset) + soft_extra) / n, "bigram_w": bigram_w, "bigram_all": bigram_all,
        "lcs_w": _lcs(claim.seq, [w for w in wcontent if w in C]) / len(claim.seq),
        "tri_w": len(claim_trigrams & trigrams(wcontent)) / len(claim_trigrams),
        "miss_max": max((claim.weights[w] for w in miss), default=0.0) / 6, "miss_n": min(len(miss), 8) / 8,
        "num_n": min(len(nums), 3) / 3, "num_found_w": num_found_w,
        "num_conflict": float(bool(nums - wset) and any(p.numbers[i:j])),
        "year_missing": float(bool(claim.years - u3)),
        "ent_found_w": len(ents & wset) / len(ents) if ents else 1.0, "ent_found_all": ent_found_all,
        "neg_mismatch": float(any(p.negs[lo:hi]) != claim.negated),
        "clause_min": min(_wcov_sub(claim, cl, u5) for cl in claim.clauses),
        "miss_wsum": min(1.0, math.fsum(claim.weights[w] for w in miss) / 12),
        "top3_u3": len(set(claim.top3) & u3) / len(claim.top3),
        "spread": (n_used - 1) / 2,
        "swap_num": cov_w * (1 - num_found_w),
        "swap_ent": cov_w * (1 - ent_found_all),
        "spec_u3": math.fsum(v for w, v in spec.items() if w in u3) / math.fsum(spec.values()),
        "density_w": len(hit_idx) / (last - first + 1), "len_passage": math.log1p(ns) / 5,
        "clause_min_s": min(max((_wcov_sub(claim, cl, h) for h in hits if h & cl), default=0.0)
                            for cl in claim.clauses),
        "soft_u3": _wcov(claim, soft3),
    }


# The window states the claim (a changed name, number, unit or negation in it is a
# conflict, not a different topic) when it holds this weighted share of the claim's other
# words. Set a priori (four words in five), not fitted.
STATES = 0.8


def _share(words: frozenset[str], present: frozenset[str]) -> float:
    return len(words & present) / len(words) if words else 1.0


def extract(question: str, claim: str, passage: str, whole_answer: bool = True) -> PairResult | None:
    """Features of one triple (the claim the whole answer, unless told otherwise); None
    when the claim has no content word and is no polar answer."""
    c = claim_profile(claim, question or "", whole_answer)
    if c is None:
        return None
    return pair_features(c, passage)
