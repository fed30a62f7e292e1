"""Features of a (question, claim, passage) triple for the learned local judge.

Pure Python; deterministic: every float sum over a set of words is math.fsum (exactly
rounded, so independent of set iteration order, which changes with PYTHONHASHSEED).
Tokens, norms, stopwords, numbers, names and sentences are tasks/core/text.py's.

Vocabulary:
- claim content words: the claim's non-stopword token norms (Snowball stems, numbers
  canonical), as a set, first occurrence order kept for bigrams / LCS.
- weight(w): informativeness of a norm = clip(7 - zipf(w), 0.5, 6) where zipf is the
  English Zipf frequency of the stem (word_zipf.json, derived from the wordfreq package's
  data, CC BY-SA 4.0 — see docs/local-judge.md); numbers weigh 4.5, unknown words 5.
- window: a run of 1..3 consecutive passage sentences (tasks/text.py sentence_spans).
- THE window (quoted, and used by every "_w" feature) is the best 1-2 sentence window:
  max weighted coverage, ties -> fewer tokens, then earliest. The quote is the passage
  substring from the first to the last claim word matched in it.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import unicodedata
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ragspan.tasks.core.text import WORD_PATTERN, norm_set, sentence_spans, word_info

_HAS_DIGIT = re.compile(r"\d")
_YEAR = re.compile(r"1[5-9]\d\d|20\d\d")
_ZIPF: dict[str, float] = json.loads((Path(__file__).with_name("word_zipf.json")).read_text(encoding="utf-8"))["zipf"]


@lru_cache(maxsize=1 << 18)
def weight(norm: str) -> float:
    """Informativeness of a norm: rare words count more (numbers: 4.5, unknown: 5)."""
    if _HAS_DIGIT.search(norm):
        return 4.5
    z = _ZIPF.get(norm)
    return 5.0 if z is None else min(6.0, max(0.5, 7.0 - z))


def _words(text: str) -> list[tuple[int, int, str]]:
    """(start, end, raw) of every word token, trailing punctuation stripped.

    The regex runs in C (findall, no match objects); each start is found with str.find
    from the previous match's end — exact, because a match begins with a word character
    and everything the regex skipped between two matches is non-word."""
    out = []
    pos, find = 0, text.find
    for match in WORD_PATTERN.findall(text):
        start = find(match, pos)
        pos = start + len(match)
        raw = match.rstrip(".,:/-'’")
        if raw:
            out.append((start, start + len(raw), raw))
    return out


_CLAUSE_WORDS = frozenset(["and", "but", "which", "who", "while", "whereas", "where", "when", "although", "including"])
_CLAUSE_PUNCT = re.compile(r"[,;:()\u2013\u2014]|\s-\s")


def _clause_words(text: str, words: list[tuple[int, int, str]] | None = None) -> list[tuple[int, int, str, bool]]:
    """Words with a flag: does a clause boundary (punctuation or a joining word) precede
    it. `words`: `_words(text)` when the caller has it already."""
    out, prev = [], 0
    for s, e, raw in _words(text) if words is None else words:
        sep = bool(_CLAUSE_PUNCT.search(text, prev, s)) or raw.lower() in _CLAUSE_WORDS
        out.append((s, e, raw, sep))
        prev = e
    return out


# ---------------------------------------------------------------------------- profiles
@dataclass(frozen=True, slots=True)
class Claim:
    seq: tuple[str, ...]  # content norms in order (repeats kept)
    clauses: tuple[frozenset[str], ...]  # content norms per clause
    content: frozenset[str]
    weights: dict[str, float]
    numbers: frozenset[str]
    years: frozenset[str]
    entities: frozenset[str]
    new: frozenset[str]  # content words not in the question
    negated: bool
    trigrams: frozenset[str]
    top3: tuple[str, ...]  # the 3 most informative content norms
    surface: dict[str, str]  # content norm -> the claim's own word (first occurrence): reasons quote it
    # What the claim adds to its question, which alone must be found: words from the
    # question are never missing names or numbers of the answer.
    new_entities: frozenset[str]
    new_numbers: frozenset[str]
    name_spellings: tuple[frozenset[str], ...]  # per new name: its norm, accent-folded, hyphen parts
    name_letters: tuple[str, ...]  # per new name: its letters, folded, casefolded
    # per new name or number: (the content norm right before it, its norm, the one right
    # after; "" where the neighbour is a stopword, punctuation-separated or absent)
    name_slots: tuple[tuple[str, str, str], ...]
    neg_strict: frozenset[str]  # content words a negation of the claim applies to (the first after it)
    neg_loose: frozenset[str]  # every content word within NEG_SCOPE tokens after a negation
    polar: str | None  # "yes" / "no": a polar answer judged as its question's statement
    quantities: tuple[tuple[str, str], ...]  # (number, unit) pairs: "30 days", "5 %"
    capitalised: frozenset[str]  # every name or code (capitalised, sentence-initial included; "2004's")


def _trigrams(norms: list[str] | tuple[str, ...]) -> frozenset[str]:
    s = " " + " ".join(norms) + " "
    return frozenset(s[i:i + 3] for i in range(len(s) - 2))


# A whole answer of at most this many words, given a question, is a short answer: judged
# as what it asserts in answer to the question ("Delhi." → capital India Delhi). A short
# piece of a longer answer (after a semicolon split) is not: it is judged on its own words.
SHORT_ANSWER_WORDS = 4
_POLAR = {"yes": "yes", "yeah": "yes", "yep": "yes", "correct": "yes", "true": "yes",
          "no": "no", "nope": "no", "false": "no", "incorrect": "no"}
# A negation applies to the content words that follow it within this many tokens; the
# first of them is what it negates for certain ("not approved"), the rest may be
# ("not formally approved by the board").
NEG_SCOPE = 5
# "not only X but Y", "whether or not": negation words that negate nothing.
_NOT_NEGATING_NEXT = frozenset(["only", "just", "merely", "simply", "least"])
_NOT_NEGATING_PREV = frozenset(["or", "whether"])
UNITS = frozenset(
    ["%", "percent", "per cent", "mm", "cm", "m", "km", "metre", "meter", "kilometre", "kilometer", "mile", "feet",
     "foot", "inch", "yard", "mg", "g", "gram", "kg", "kilogram", "ton", "tonn", "pound", "lb", "ounc", "ml", "l",
     "litr", "liter", "gallon", "second", "minut", "hour", "day", "week", "month", "year", "decad", "centuri",
     "dollar", "euro", "cent", "usd", "eur", "gbp", "yen", "rupe", "thousand", "million", "billion", "trillion",
     "mph", "kph", "kmh", "km/h", "hz", "khz", "mhz", "ghz", "kb", "mb", "gb", "tb", "w", "kw", "mw", "gw", "kwh",
     "v", "volt", "watt", "°c", "°f", "degre", "celsius", "fahrenheit", "acr", "hectar", "sq", "squar", "time",
     "fold", "point", "metr", "kilometr", "centimetr", "millimetr", "dose", "tablet", "patient", "person", "peopl", "employe", "user", "member", "student", "item",
     "request", "core", "node", "server", "replica", "byte", "kib", "mib", "gib"])


def _short_answer(claim: str) -> bool:
    """A few words with at least one content word (a claim without any is no answer)."""
    words = _words(claim)
    return 0 < len(words) <= SHORT_ANSWER_WORDS and any(not word_info(r)[4] for _, _, r in words)


def _polar(claim: str) -> tuple[str, str] | None:
    """("yes" | "no", the words after it) when a short answer opens with a polar word."""
    words = _words(claim)
    if not words or len(words) > SHORT_ANSWER_WORDS:
        return None
    first = _POLAR.get(words[0][2].casefold())
    return (first, claim[words[0][1]:]) if first else None


def fold(text: str) -> str:
    """Accents dropped: 'Zürich' and 'Zurich' are one name."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def negation_scopes(text: str) -> tuple[frozenset[str], frozenset[str], bool]:
    """(strict, loose, negated): the content norms each negation of `text` applies to.

    strict: the first content word within NEG_SCOPE tokens after a negation; loose: every
    content word in that reach; negated: any negation that negates something. Negations
    that negate nothing ("not only", "whether or not") are skipped."""
    strict, loose, negated, _free = negation_reach(text)
    return strict, loose, negated


def negation_reach(text: str) -> tuple[frozenset[str], frozenset[str], bool, frozenset[str]]:
    """negation_scopes, and the content norms that also occur outside every negation's
    reach ("is not in orbit around the Earth … it orbits the Sun": `orbit` is stated too)."""
    toks = _words(text)
    words = [raw for _, _, raw in toks]
    infos = [word_info(w) for w in words]
    strict: set[str] = set()
    loose: set[str] = set()
    reached: set[int] = set()
    negated = False
    for k, f in enumerate(infos):
        if not f[3]:
            continue
        nxt = words[k + 1].casefold() if k + 1 < len(words) else ""
        prev = words[k - 1].casefold() if k > 0 else ""
        if nxt in _NOT_NEGATING_NEXT or prev in _NOT_NEGATING_PREV:
            continue
        if k == 0 and words[0].casefold() == "no" and (nxt == "but" or text[toks[0][1]:toks[0][1] + 1] in ",.;!:-"):
            continue  # "No, …" / "No but …": a reply to a question, negating nothing that follows
        reach = [g[0] for g in infos[k + 1:k + 1 + NEG_SCOPE] if not g[4]]
        negated = True
        reached.update(range(k + 1, k + 1 + NEG_SCOPE))
        if reach:
            strict.add(reach[0])
            loose.update(reach)
    free = frozenset(f[0] for k, f in enumerate(infos) if not f[4] and k not in reached)
    return frozenset(strict), frozenset(loose), negated, free


def quantities(text: str) -> tuple[tuple[str, str], ...]:
    """(number, unit) for every number followed by a unit word or a percent sign."""
    return tuple((n, u) for n, u, _s, _e in quantity_spans(text))


def quantity_spans(text: str) -> list[tuple[str, str, int, int]]:
    """(number, unit, start, end) for every number followed by a unit word or a percent
    sign: `quantities`, with where the unit is written (answer spans mark it; a percent
    sign, no word of its own, with its number: "5%")."""
    out = []
    words = _words(text)
    for k, (s, e, raw) in enumerate(words):
        f = word_info(raw)
        if not f[1]:
            continue
        if text[e:e + 2].lstrip().startswith("%"):
            out.append((f[0], "%", s, text.index("%", e) + 1))
        elif k + 1 < len(words):
            unit = word_info(words[k + 1][2])[0]
            if unit in UNITS or words[k + 1][2].casefold() in UNITS:
                out.append((f[0], "%" if unit in ("percent", "per cent") else unit, words[k + 1][0], words[k + 1][1]))
    return out


@lru_cache(maxsize=8192)  # a claim is judged twice (retrieved chunks, then corpus hits) within its shard
def claim_profile(claim: str, question: str = "", whole_answer: bool = False) -> Claim | None:
    """Profile of a claim; None when it has no content word (and is no polar answer)."""
    own = claim
    polar = _polar(claim) if question and whole_answer else None
    if polar is not None:
        # "Yes." / "No, never." answering a question asserts the question's statement
        # (negated for "no"): judged as that statement, with the answer's other words.
        extra = [raw for _, _, raw in _words(question) if not word_info(raw)[4]]
        claim = "the " + " ".join(extra) + " " + polar[1]
        own = claim
    elif question and whole_answer and _short_answer(claim):
        # The question's content words lead the claim (after a stopword, so the first of
        # them is not mistaken for a sentence-initial capital); the claim's own words stay
        # the ones it adds (`new`), which must be supported.
        extra = [raw for _, _, raw in _words(question) if not word_info(raw)[4]]
        claim = "the " + " ".join(extra) + " " + claim
    words = [(raw, word_info(raw)) for _, _, raw in _words(claim)]
    content = [(i, raw, f) for i, (raw, f) in enumerate(words) if not f[4]]
    if not content:
        return None
    seq = tuple(f[0] for _, _, f in content)
    cset = frozenset(seq)
    if polar is not None:
        qset = frozenset()  # every word of the statement is what the answer asserts
    elif own is not claim:
        qset = cset - frozenset(word_info(r)[0] for _, _, r in _words(own))
    else:
        qset = frozenset(word_info(r)[0] for _, _, r in _words(question)) if question else frozenset()
    new = cset - qset
    clauses, cur = [], set()
    for _, _, raw, sep in _clause_words(claim):
        if sep and cur:
            clauses.append(frozenset(cur))
            cur = set()
        f = word_info(raw)
        if not f[4]:
            cur.add(f[0])
    if cur:
        clauses.append(frozenset(cur))
    entities = frozenset(f[0] for i, raw, f in content if f[2] and (i > 0 or raw.isupper()))
    numbers = frozenset(f[0] for _, _, f in content if f[1])
    # A yes/no answer adds no name or number: its statement's are the question's.
    new_names = [] if polar is not None else [(raw, f) for i, raw, f in content
                                              if f[2] and (i > 0 or raw.isupper()) and f[0] in new and not f[1]]
    # A short answer's negations include its question's ("Which team did not qualify?").
    strict, loose, negated = negation_scopes(f"{question} {own}" if question and own is not claim and polar is None
                                             else own)
    if polar is not None:
        negated = negation_scopes(question)[2] != negated
    if polar is not None and polar[0] == "no":
        negated = not negated
    return Claim(
        seq=seq,
        clauses=tuple(clauses),
        content=cset,
        weights={w: weight(w) for w in cset},
        numbers=numbers,
        years=frozenset(f[0] for _, raw, f in content if f[1] and _YEAR.fullmatch(f[0])),
        entities=entities,
        new=new if new else cset,
        negated=negated,
        trigrams=_trigrams(seq),
        top3=tuple(sorted(cset, key=lambda w: (-weight(w), w))[:3]),
        surface=_surface(content),
        new_entities=frozenset(f[0] for _, f in new_names),
        new_numbers=frozenset() if polar is not None else numbers & new,
        name_spellings=tuple(_spellings(raw, f[0]) for raw, f in new_names),
        name_slots=_name_slots(claim, {f[0] for _, f in new_names} | (set() if polar else numbers & new)),
        name_letters=tuple(re.sub(r"[\W_]+", "", fold(raw).casefold()) or raw for raw, _ in new_names),
        neg_strict=strict,
        neg_loose=loose,
        polar=polar[0] if polar else None,
        quantities=quantities(own),
        capitalised=frozenset(f[0] for _, raw, f in content if (raw[:1].isupper() or f[2]) and not f[1]),
    )


def _name_slots(text: str, names: set[str]) -> tuple[tuple[str, str, str], ...]:
    toks = _words(text)
    infos = [word_info(raw) for _, _, raw in toks]
    out = []
    for i, f in enumerate(infos):
        if f[0] not in names:
            continue
        def neighbour(j: int, gap: tuple[int, int]) -> str:
            ok = 0 <= j < len(toks) and not infos[j][4] and not text[gap[0]:gap[1]].strip(" ,")
            return infos[j][0] if ok else ""
        prev = neighbour(i - 1, (toks[i - 1][1], toks[i][0]) if i > 0 else (0, 0))
        nxt = neighbour(i + 1, (toks[i][1], toks[i + 1][0]) if i + 1 < len(toks) else (0, 0))
        out.append((prev, f[0], nxt))
    return tuple(out)


def _spellings(raw: str, norm: str) -> frozenset[str]:
    """Norms under which a name counts as present: its own, accent-folded, and (for a
    hyphenated name) each part."""
    out = {norm, word_info(fold(raw))[0]}
    for part in re.split(r"[-‐–]", raw):
        if part and part != raw:
            out.add(word_info(part)[0])
    return frozenset(out)


def _surface(content: list) -> dict[str, str]:
    """Norm -> the word as written in the claim, trimmed of edge punctuation."""
    out: dict[str, str] = {}
    for _, raw, f in content:
        out.setdefault(f[0], raw.strip(".,;:!?()[]{}\"'«»“”‘’"))
    return out


@dataclass(frozen=True, slots=True)
class Passage:
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    norms: tuple[str, ...]  # every token's norm (stopwords included)
    content: tuple[bool, ...]  # token is a content word
    negs: tuple[bool, ...]
    numbers: tuple[bool, ...]
    sents: tuple[tuple[int, int], ...]  # token ranges per sentence
    sent_sets: tuple[frozenset[str], ...]
    all_norms: frozenset[str]


@lru_cache(maxsize=1024)
def passage_norms(passage: str) -> frozenset[str]:
    """Every norm of the passage: the cheap bound (no sentence split). The same set as
    the norms of `_words(passage)`, built by core.text's per-distinct-word lookup."""
    return norm_set(passage)


@lru_cache(maxsize=4096)  # a claim's passages are reused by its answer's other claims, not later
def passage_profile(passage: str) -> Passage:
    toks = _words(passage)
    infos = [word_info(r) for _, _, r in toks]
    starts = [s for s, _, _ in toks]
    norms = tuple(f[0] for f in infos)
    bounds = []
    for s, e in sentence_spans(passage):
        i, j = bisect_left(starts, s), bisect_left(starts, e)
        if j > i:
            bounds.append((i, j))
    if not bounds and toks:
        bounds = [(0, len(toks))]
    return Passage(
        starts=tuple(starts), ends=tuple(e for _, e, _ in toks), norms=norms,
        content=tuple(not f[4] for f in infos), negs=tuple(f[3] for f in infos),
        numbers=tuple(f[1] for f in infos), sents=tuple(bounds),
        sent_sets=tuple(frozenset(norms[i:j]) for i, j in bounds),
        all_norms=frozenset(norms),
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
)
N_FEATURES = len(FEATURES)


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


def _wcov(c: Claim, present) -> float:
    tot = math.fsum(c.weights.values())
    return math.fsum(v for w, v in c.weights.items() if w in present) / tot


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
    tot = math.fsum(c.weights[w] for w in words)
    return math.fsum(c.weights[w] for w in words & present) / tot if tot else 1.0


def _greedy_union(c: Claim, sets: tuple[frozenset[str], ...], k: int, cand: list[int]) -> frozenset[str]:
    return _greedy_union_n(c, sets, k, cand)[0]


def _greedy_union_n(c: Claim, sets: tuple[frozenset[str], ...], k: int, cand: list[int]) -> tuple[frozenset[str], int]:
    """Greedy union of up to k sentences maximising weighted coverage; (covered words, sentences used)."""
    covered: set[str] = set()
    used = 0
    for _ in range(k):
        best, gain = -1, 0.0
        for s in cand:
            g = math.fsum(c.weights[w] for w in (c.content & sets[s]) - covered)
            if g > gain:
                best, gain = s, g
        if best < 0:
            break
        covered |= c.content & sets[best]
        used += 1
    return frozenset(covered), used


_LOOKBEHIND, _LOOKAHEAD = 3, 2


def unsupported_bound(claim: Claim, passage: str) -> float:
    """Share of claim content words anywhere in the passage (cov_all), the short-circuit."""
    return len(claim.content & passage_norms(passage)) / len(claim.content)


def pair_features(claim: Claim, passage: str) -> PairResult:
    """Every feature of FEATURES for one (profiled claim, passage), and the quote."""
    p = passage_profile(passage)
    C = claim.content
    n = len(C)
    allp = p.all_norms
    cov_all = len(C & allp) / n
    wcov_all = _wcov(claim, allp)
    new_cov_all = len(claim.new & allp) / len(claim.new)
    ns = len(p.sents)
    hits = [C & s for s in p.sent_sets]
    cand = [k for k in range(ns) if hits[k]]
    wsum = math.fsum(claim.weights.values())

    cov_w1 = max((len(h) / n for h in hits), default=0.0)
    # THE window: best 1-2 sentences
    best = (-1.0, 0, 0)  # (wcov, -tokens, -start) maximised
    bw: tuple[int, int] | None = None
    bset: frozenset[str] = frozenset()
    wcov_w3 = 0.0
    for k in cand:
        for span in (1, 2, 3):
            if k + span > ns:
                break
            if span == 1:
                hs = hits[k]
            else:
                hs = hs | hits[k + span - 1]
            wc = math.fsum(claim.weights[w] for w in hs) / wsum
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
        feats.update(cov_all=cov_all, wcov_all=wcov_all, new_cov_all=new_cov_all,
                     num_n=min(len(claim.numbers), 3) / 3, num_found_w=0.0 if claim.numbers else 1.0,
                     ent_found_w=0.0 if claim.entities else 1.0,
                     ent_found_all=(len(claim.entities & allp) / len(claim.entities)) if claim.entities else 1.0,
                     miss_max=max(claim.weights.values()) / 6, miss_n=min(n, 8) / 8,
                     year_missing=float(bool(claim.years)),
                     len_claim=math.log1p(n) / 3,
                     miss_wsum=min(1.0, math.fsum(claim.weights.values()) / 12),
                     len_passage=math.log1p(len(p.sents)) / 5,
                     num_found_all=_share(claim.new_numbers, allp),
                     ent_new_all=_names_found(claim, allp, passage),
                     from_question=1 - len(claim.new) / n)
        return PairResult([feats[f] for f in FEATURES], None, None, None)
    i, j = bw
    wnorms = p.norms[i:j]
    wset = frozenset(wnorms)
    wcov_w = best[0]
    cov_w = len(bset) / n
    u3, n_used = _greedy_union_n(claim, p.sent_sets, 3, cand)
    u5 = _greedy_union(claim, p.sent_sets, 5, cand) if len(cand) > 3 else u3
    wcov_u3 = _wcov(claim, u3)
    wcov_u5 = _wcov(claim, u5)
    new_tot = math.fsum(claim.weights[w] for w in claim.new)
    new_wcov_u3 = math.fsum(claim.weights[w] for w in claim.new & u3) / new_tot
    # soft: unmatched claim words matching a window content word on the first 5 letters
    missing_w = C - wset
    if missing_w:
        pref = {w[:5] for w, c in zip(wnorms, p.content[i:j]) if c and len(w) >= 5}
        soft_extra = sum(1 for w in missing_w if len(w) >= 5 and w[:5] in pref)
    else:
        soft_extra = 0
    soft_w = (len(bset) + soft_extra) / n
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
    lcs_w = _lcs(claim.seq, [w for w in wcontent if w in C]) / len(claim.seq)
    tri = _trigrams(wcontent)
    tri_w = len(claim.trigrams & tri) / len(claim.trigrams)
    miss = C - u5
    miss_max = max((claim.weights[w] for w in miss), default=0.0) / 6
    miss_n = min(len(miss), 8) / 8
    nums = claim.numbers
    num_found_w = len(nums & wset) / len(nums) if nums else 1.0
    win_has_num = any(p.numbers[i:j])
    num_conflict = float(bool(nums - wset) and win_has_num)
    year_missing = float(bool(claim.years - u3))
    ents = claim.entities
    ent_found_w = len(ents & wset) / len(ents) if ents else 1.0
    ent_found_all = len(ents & allp) / len(ents) if ents else 1.0
    # negation in the matched stretch
    hit_idx = [k for k in range(i, j) if p.norms[k] in C]
    first, last = hit_idx[0], hit_idx[-1]
    lo, hi = max(i, first - _LOOKBEHIND), min(j, last + 1 + _LOOKAHEAD)
    neg_mismatch = float(any(p.negs[lo:hi]) != claim.negated)
    density_w = len(hit_idx) / (last - first + 1)
    clause_min_s = min(max((_wcov_sub(claim, cl, h) for h in hits if h & cl), default=0.0) for cl in claim.clauses)
    miss3 = C - u3
    if miss3:
        sents3 = [k for k in cand if claim.content & p.sent_sets[k] & u3]
        pref3 = {w[:5] for k in sents3 for w in p.sent_sets[k] if len(w) >= 5}
        soft3 = u3 | {w for w in miss3 if len(w) >= 5 and w[:5] in pref3}
    else:
        soft3 = u3
    soft_u3 = _wcov(claim, soft3)
    sdf = {w: sum(1 for h in hits if w in h) for w in C}
    spec = {w: claim.weights[w] * math.log1p(ns / max(1, sdf[w])) for w in C}
    spec_u3 = math.fsum(v for w, v in spec.items() if w in u3) / math.fsum(spec.values())
    wtext = passage[p.starts[i]:p.ends[j - 1]]
    fit = _greedy_union(claim, p.sent_sets, min(5, max(1, len(claim.clauses))), cand)
    # The window states the claim apart from what may have been changed (its own names
    # and numbers): only then is a difference in them a conflict, not another topic.
    changeable = claim.capitalised | claim.new_numbers | {u for _, u in claim.quantities}
    about = _wcov_sub(claim, C - changeable, wset) >= STATES
    feats = {
        "new_cov_w": _wcov_sub(claim, claim.new, wset),
        "cov_fit": max(wcov_w, _wcov(claim, fit)),
        "num_found_all": _share(claim.new_numbers, allp),
        "ent_new_all": _names_found(claim, allp, passage),
        "num_new_conflict": float(about and _number_conflict(claim, p, i, j)),
        "unit_conflict": float(about and _unit_conflict(claim, wtext)),
        "ent_conflict": float(about and _name_conflict(claim, wset, wtext, allp, passage)),
        "neg_conflict": float(_negation_conflict(claim, wset, wtext, about)),
        "from_question": 1 - len(claim.new) / n,
        "cov_all": cov_all, "wcov_all": wcov_all, "new_cov_all": new_cov_all, "cov_w1": cov_w1,
        "wcov_w": wcov_w, "cov_w": cov_w, "wcov_w3": wcov_w3, "wcov_u3": wcov_u3, "wcov_u5": wcov_u5,
        "new_wcov_u3": new_wcov_u3, "soft_w": soft_w, "bigram_w": bigram_w, "bigram_all": bigram_all,
        "lcs_w": lcs_w, "tri_w": tri_w, "miss_max": miss_max, "miss_n": miss_n,
        "num_n": min(len(nums), 3) / 3, "num_found_w": num_found_w, "num_conflict": num_conflict,
        "year_missing": year_missing, "ent_found_w": ent_found_w, "ent_found_all": ent_found_all,
        "neg_mismatch": neg_mismatch, "len_claim": math.log1p(n) / 3,
        "clause_min": min(_wcov_sub(claim, cl, u5) for cl in claim.clauses),
        "miss_wsum": min(1.0, math.fsum(claim.weights[w] for w in miss) / 12),
        "top3_u3": len(set(claim.top3) & u3) / len(claim.top3),
        "spread": (n_used - 1) / 2,
        "swap_num": cov_w * (1 - num_found_w),
        "swap_ent": cov_w * (1 - ent_found_all),
        "spec_u3": spec_u3, "density_w": density_w, "len_passage": math.log1p(ns) / 5,
        "clause_min_s": clause_min_s, "soft_u3": soft_u3,
    }
    return PairResult([feats[f] for f in FEATURES], p.starts[first], p.ends[last], bw, fit, wset)


# The window states the claim (a changed name, number, unit or negation in it is a
# conflict, not a different topic) when it holds this weighted share of the claim's other
# words. Set a priori (four words in five), not fitted.
STATES = 0.8
_NUMBER_TOLERANCE = 0.05  # "3.2 million" vs "3.17 million": the same figure, rounded


def _share(words: frozenset[str], present: frozenset[str]) -> float:
    return len(words & present) / len(words) if words else 1.0


def _names_found(claim: Claim, present: frozenset[str], text: str) -> float:
    """Share of the claim's own names found in `text` under any spelling (accents folded)."""
    if not claim.name_spellings:
        return 1.0
    found = [bool(sp & present) for sp in claim.name_spellings]
    if not all(found):
        folded = passage_norms(fold(text))
        # "Southeast" for "South East": the name's letters run together in the text.
        squeezed = re.sub(r"[\W_]+", "", fold(text).casefold())
        found = [f or bool(sp & folded) or raw in squeezed
                 for f, sp, raw in zip(found, claim.name_spellings, claim.name_letters, strict=True)]
    return sum(found) / len(found)


def _as_float(norm: str) -> float | None:
    try:
        return float(norm)
    except ValueError:
        return None


def _number_conflict(claim: Claim, p: Passage, i: int, j: int) -> bool:
    """A number the claim adds is not in the window (nor a rounding of one), and the
    window gives another number: the figure was changed."""
    if not claim.new_numbers:
        return False
    window = {p.norms[k] for k in range(i, j) if p.numbers[k]}
    others = window - claim.numbers
    if not others:
        return False
    for x in claim.new_numbers - window:
        if not any(_rounds_to(x, w) for w in window):
            return True
    return False


def _significant(norm: str) -> int:
    return len(norm.replace(".", "").strip("0"))


def _rounds_to(claimed: str, stated: str) -> bool:
    """The claim's number is the window's rounded: fewer significant digits, within 5 %
    ("3.2 million" for "3.17 million"); 1999 is never 1998."""
    a, b = _as_float(claimed), _as_float(stated)
    if a is None or b is None or _significant(claimed) >= _significant(stated):
        return False
    return abs(a - b) <= _NUMBER_TOLERANCE * max(abs(a), abs(b))


def _unit_conflict(claim: Claim, wtext: str) -> bool:
    """The window gives a number of the claim with another unit and never with the claim's."""
    if not claim.quantities:
        return False
    win = set(quantities(wtext))
    units = {n: {u for m, u in win if m == n} for n, _ in claim.quantities}
    return any(units[n] and u not in units[n] for n, u in claim.quantities)


def _name_conflict(claim: Claim, wset: frozenset[str], wtext: str, allp: frozenset[str], passage: str) -> bool:
    """A name the claim adds is in no spelling in the window, which names someone or
    something else the claim does not; for a claim of several clauses (whose names may
    sit in other sentences) the name must be missing from the whole passage."""
    win = [(word_info(raw), k > 0 or raw.isupper()) for k, (_s, _e, raw) in enumerate(_words(wtext))]
    if _names_found(claim, wset, wtext) >= 1.0 or (
            len(claim.clauses) > 1 and _names_found(claim, allp, passage) >= 1.0):
        return _slot_conflict(claim, [f[0] for f, _ in win], [(f[2] and ok) or f[1] for f, ok in win])
    return any(f[2] and not f[1] and ok and f[0] not in claim.content for f, ok in win)


_SLOT_REACH = 3  # "President Obama" is stated by "President Barack Obama"


def _slot_conflict(claim: Claim, norms: list[str], names: list[bool]) -> bool:
    """Every name is there, but in another place: where the claim has "Columbia
    Maryland", the window has "Columbia University" (and Maryland elsewhere); where it has
    "Nov. 21, 2015", the window "Nov. 21, 2014". A content word next to a name or number
    of the claim is, in the window, next to another name or number and never within
    reach of the claim's."""
    return next(slot_clashes(claim, norms, names), None) is not None


def slot_clashes(claim: Claim, norms: list[str], names: list[bool]) -> Iterator[tuple[str, int]]:
    """(the claim's name or number, the index in `norms` of the other one standing in its
    place) for each slot conflict (`_slot_conflict`; answer spans mark both)."""
    for prev, name, nxt in claim.name_slots:
        for anchor, after in ((prev, True), (nxt, False)):
            if not anchor:
                continue
            at = [i for i, w in enumerate(norms) if w == anchor]
            if not at:
                continue
            def near(i: int, after: bool = after) -> list[str]:
                return norms[i + 1:i + 1 + _SLOT_REACH] if after else norms[max(0, i - _SLOT_REACH):i]
            if any(name in near(i) for i in at):
                continue
            j = [i + 1 if after else i - 1 for i in at]
            # (the other one is not a name the claim itself states: lists come in any order)
            for x in j:
                if 0 <= x < len(norms) and names[x] and norms[x] not in claim.content:
                    yield name, x
                    break


def _negation_conflict(claim: Claim, wset: frozenset[str], wtext: str, about: bool) -> bool:
    """Polar answers: the window's negation of the statement's words differs from the
    answer's. Otherwise, in a window about the claim: the claim negates a word the window
    states un-negated, or the window negates a word the claim states un-negated."""
    if not about:
        return False
    w_strict, w_loose, _, w_free = negation_reach(wtext)
    if claim.polar is not None:
        # "Yes"/"No" to a question the window states (nearly word for word): does the
        # window negate the statement's words as the answer does?
        return claim.negated != bool(w_loose & claim.content)
    # (a word the window negates once and states plainly elsewhere is not contradicted)
    return bool((claim.neg_strict & wset) - w_loose) or bool((w_strict & claim.content) - claim.neg_loose - w_free)


def extract(question: str, claim: str, passage: str, whole_answer: bool = True) -> PairResult | None:
    """Features of one triple (the claim the whole answer, unless told otherwise); None
    when the claim has no content word and is no polar answer."""
    c = claim_profile(claim, question or "", whole_answer)
    if c is None:
        return None
    return pair_features(c, passage)
