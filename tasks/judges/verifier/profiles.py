"""Profiles: what the verifier keeps of a claim and of a passage, each computed once.

Pure; deterministic. Vocabulary:
- claim content words: the claim's non-stopword token norms (Snowball stems, numbers
  canonical), as a set, first occurrence order kept for bigrams / LCS.
- weight(w): informativeness of a norm = clip(7 - zipf(w), 0.5, 6) where zipf is the
  English Zipf frequency of the stem (word_zipf.json, derived from the wordfreq package's
  data, CC BY-SA 4.0 — see docs/local-judge.md); numbers weigh 4.5, unknown words 5.
- a passage's sentences: tasks/core/text.py sentence_spans, as token ranges.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_left
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter
from pathlib import Path

from ragspan.tasks.core.text import WORD_PATTERN, norm_set, sentence_spans, word_info
from ragspan.tasks.judges.verifier.tokens import (
    MATCH_INFO,
    Quantity,
    Token,
    clause_breaks,
    fold,
    letters,
    negation_reach,
    quantities,
    tokens,
    word_offsets,
    words,
)

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


# ---------------------------------------------------------------------------- claims
@dataclass(frozen=True, slots=True)
class Claim:
    text: str  # the claim as written (a short or polar answer is judged as more: see claim_profile)
    written: tuple[Token, ...]  # its tokens: the only words answer spans can mark
    asked: frozenset[str]  # norms it may take from its question without being marked
    seq: tuple[str, ...]  # content norms in order (repeats kept)
    clauses: tuple[frozenset[str], ...]  # content norms per clause
    content: frozenset[str]
    weights: dict[str, float]
    numbers: frozenset[str]
    years: frozenset[str]
    entities: frozenset[str]
    new: frozenset[str]  # content words not in the question
    negated: bool
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
    # numbers with a unit: "30 days", "5 %" (offsets into the statement judged: the claim
    # as written unless it is a polar answer)
    quantities: tuple[Quantity, ...]
    capitalised: frozenset[str]  # every name or code (capitalised, sentence-initial included; "2004's")
    # per claim, not per pair: the sum of `weights` (math.fsum), the same over `new`, and
    # whether the claim always adds what no passage's words state (features.added_always)
    weight_sum: float
    new_weight_sum: float
    always_adds: bool


def trigrams(norms: list[str] | tuple[str, ...]) -> frozenset[str]:
    """Character trigrams of the norms joined by spaces (padded at both ends)."""
    s = " " + " ".join(norms) + " "
    return frozenset(s[i:i + 3] for i in range(len(s) - 2))


# A whole answer of at most this many words, given a question, is a short answer: judged
# as what it asserts in answer to the question ("Delhi." → capital India Delhi). A short
# piece of a longer answer (after a semicolon split) is not: it is judged on its own words.
SHORT_ANSWER_WORDS = 4
_POLAR = {"yes": "yes", "yeah": "yes", "yep": "yes", "correct": "yes", "true": "yes",
          "no": "no", "nope": "no", "false": "no", "incorrect": "no"}


def is_short_answer(claim: str) -> bool:
    """A few words with at least one content word (a claim without any is no answer)."""
    ws = words(claim)
    return 0 < len(ws) <= SHORT_ANSWER_WORDS and any(not word_info(w.raw).is_stop for w in ws)


def polar_opening(claim: str) -> tuple[str, str] | None:
    """("yes" | "no", the words after it) when a short answer opens with a polar word."""
    ws = words(claim)
    if not ws or len(ws) > SHORT_ANSWER_WORDS:
        return None
    first = _POLAR.get(ws[0].raw.casefold())
    return (first, claim[ws[0].end:]) if first else None


def asked_norms(question: str, whole_answer: bool, claim: str) -> frozenset[str]:
    """Norms the claim may take from its question without being marked. A short answer's
    own words are what it asserts: none of them count as taken."""
    if not question or (whole_answer and is_short_answer(claim)):
        return frozenset()
    return word_norms(question)


@lru_cache(maxsize=1024)  # a question is asked by every claim of its answer
def word_norms(text: str) -> frozenset[str]:
    """The norm of every word of `text`, stopwords included."""
    return frozenset(word_info(w.raw).norm for w in words(text))


def judged_statement(claim: str, question: str = "",
                     whole_answer: bool = False) -> tuple[str, str, tuple[str, str] | None]:
    """(the statement a claim is judged as, the part of it that is the claim's own words,
    the polar opening or None). The claim itself unless it is a short or polar whole
    answer to a question. `own is statement` unless a short answer's question words lead it
    (claim_profile tells the cases apart by identity)."""
    own = claim
    polar = polar_opening(claim) if question and whole_answer else None
    if polar is not None:
        # "Yes." / "No, never." answering a question asserts the question's statement
        # (negated for "no"): judged as that statement, with the answer's other words.
        extra = [t.raw for t in tokens(question) if not t.info.is_stop]
        claim = "the " + " ".join(extra) + " " + polar[1]
        own = claim
    elif question and whole_answer and is_short_answer(claim):
        # The question's content words lead the claim (after a stopword, so the first of
        # them is not mistaken for a sentence-initial capital); the claim's own words stay
        # the ones it adds (`new`), which must be supported.
        extra = [t.raw for t in tokens(question) if not t.info.is_stop]
        claim = "the " + " ".join(extra) + " " + claim
    return claim, own, polar


def claim_content(claim: str, question: str = "", whole_answer: bool = False) -> frozenset[str]:
    """`claim_profile(claim, question, whole_answer).content` without the rest of the
    profile (empty exactly when the profile is None): the words of the same statement,
    looked up in the same per-word table as `tokens`. What the short-circuit bound needs
    of a claim, at a fraction of a profile's cost (verifier/bulk.py)."""
    statement = judged_statement(claim, question, whole_answer)[0]
    return frozenset(f.norm for f in map(MATCH_INFO.__getitem__, WORD_PATTERN.findall(statement)) if not f.is_stop)


@lru_cache(maxsize=8192)  # a claim is judged twice (retrieved chunks, then corpus hits) within its shard
def claim_profile(claim: str, question: str = "", whole_answer: bool = False) -> Claim | None:
    """Profile of a claim; None when it has no content word (and is no polar answer)."""
    written = claim
    claim, own, polar = judged_statement(claim, question, whole_answer)
    toks = tokens(claim)
    content = [(i, t.raw, t.info) for i, t in enumerate(toks) if not t.info.is_stop]
    if not content:
        return None
    seq = tuple(f.norm for _, _, f in content)
    cset = frozenset(seq)
    if polar is not None:
        qset = frozenset()  # every word of the statement is what the answer asserts
    elif own is not claim:
        qset = cset - word_norms(own)
    else:
        qset = word_norms(question) if question else frozenset()
    new = cset - qset
    clauses, cur = [], set()
    for t, sep in zip(toks, clause_breaks(claim, toks), strict=True):
        if sep and cur:
            clauses.append(frozenset(cur))
            cur = set()
        if not t.info.is_stop:
            cur.add(t.info.norm)
    if cur:
        clauses.append(frozenset(cur))
    entities = frozenset(f.norm for i, raw, f in content if f.is_entity and (i > 0 or raw.isupper()))
    numbers = frozenset(f.norm for _, _, f in content if f.is_number)
    # A yes/no answer adds no name or number: its statement's are the question's.
    new_names = [] if polar is not None else [(raw, f) for i, raw, f in content
                                              if f.is_entity and (i > 0 or raw.isupper()) and f.norm in new
                                              and not f.is_number]
    # A short answer's negations include its question's ("Which team did not qualify?").
    reach = (negation_reach(f"{question} {own}") if question and own is not claim and polar is None
             else negation_reach(own, toks if own is claim else None))
    negated = reach.negated
    if polar is not None:
        negated = negation_reach(question).negated != negated
    if polar is not None and polar[0] == "no":
        negated = not negated
    written_toks = tuple(toks) if claim is written else tuple(tokens(written))
    weights = {w: weight(w) for w in cset}
    final_new = new if new else cset
    return Claim(
        text=written,
        written=written_toks,
        asked=asked_norms(question, whole_answer, written),
        seq=seq,
        clauses=tuple(clauses),
        content=cset,
        weights=weights,
        numbers=numbers,
        years=frozenset(f.norm for _, raw, f in content if f.is_number and _YEAR.fullmatch(f.norm)),
        entities=entities,
        new=final_new,
        negated=negated,
        top3=tuple(sorted(cset, key=lambda w: (-weight(w), w))[:3]),
        surface=_surface(content),
        new_entities=frozenset(f.norm for _, f in new_names),
        new_numbers=frozenset() if polar is not None else numbers & new,
        name_spellings=tuple(_spellings(raw, f.norm) for raw, f in new_names),
        name_slots=_name_slots(claim, toks, {f.norm for _, f in new_names} | (set() if polar else numbers & new)),
        name_letters=tuple(letters(raw) or raw for raw, _ in new_names),
        neg_strict=reach.strict,
        neg_loose=reach.loose,
        polar=polar[0] if polar else None,
        quantities=tuple(quantities(own, toks if own is claim else None)),
        capitalised=frozenset(f.norm for _, raw, f in content if (raw[:1].isupper() or f.is_entity)
                              and not f.is_number),
        weight_sum=math.fsum(weights.values()),
        new_weight_sum=math.fsum(weights[w] for w in final_new),
        always_adds=_always_adds(written, polar, cset, written_toks),
    )


# A claim with one of these words speaks of its speaker (features.added_always).
SPEAKER = frozenset(["i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "we", "our"])


def _always_adds(text: str, polar: tuple[str, str] | None, content: frozenset[str],
                 written: tuple[Token, ...]) -> bool:
    """features.added_always of the claim: a polar or short answer judged with its question
    (its statement's words are not its own), or a conversational claim — a question, an
    exclamation, or one in the first person."""
    if polar is not None or not content <= {t.info.norm for t in written}:
        return True
    return any(c in text for c in "?!") or any(t.raw.lower() in SPEAKER for t in written)


def _name_slots(text: str, toks: list[Token], names: set[str]) -> tuple[tuple[str, str, str], ...]:
    out = []
    for i, t in enumerate(toks):
        if t.info.norm not in names:
            continue
        def neighbour(j: int, gap: tuple[int, int]) -> str:
            ok = 0 <= j < len(toks) and not toks[j].info.is_stop and not text[gap[0]:gap[1]].strip(" ,")
            return toks[j].info.norm if ok else ""
        prev = neighbour(i - 1, (toks[i - 1].end, t.start) if i > 0 else (0, 0))
        nxt = neighbour(i + 1, (t.end, toks[i + 1].start) if i + 1 < len(toks) else (0, 0))
        out.append((prev, t.info.norm, nxt))
    return tuple(out)


_HYPHENS = re.compile(r"[-‐–]")


def _spellings(raw: str, norm: str) -> frozenset[str]:
    """Norms under which a name counts as present: its own, accent-folded, and (for a
    hyphenated name) each part."""
    out = {norm, word_info(fold(raw)).norm}
    for part in _HYPHENS.split(raw):
        if part and part != raw:
            out.add(word_info(part).norm)
    return frozenset(out)


def _surface(content: list) -> dict[str, str]:
    """Norm -> the word as written in the claim, trimmed of edge punctuation."""
    out: dict[str, str] = {}
    for _, raw, f in content:
        out.setdefault(f.norm, raw.strip(".,;:!?()[]{}\"'«»“”‘’"))
    return out


# ---------------------------------------------------------------------------- passages
@dataclass(frozen=True, slots=True)
class Passage:
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    norms: tuple[str, ...]  # every token's norm (stopwords included)
    content: tuple[bool, ...]  # token is a content word
    negs: tuple[bool, ...]
    numbers: tuple[bool, ...]
    entities: tuple[bool, ...]  # WordInfo.is_entity
    sents: tuple[tuple[int, int], ...]  # token ranges per sentence
    sent_sets: tuple[frozenset[str], ...]
    all_norms: frozenset[str]


@lru_cache(maxsize=1024)
def passage_norms(passage: str) -> frozenset[str]:
    """Every norm of the passage: the cheap bound (no sentence split). The same set as
    the norms of `tokens(passage)`, built by core.text's per-distinct-word lookup."""
    return norm_set(passage)


_norm_of, _is_stop, _is_negation, _is_number, _is_entity = (
    attrgetter(f) for f in ("norm", "is_stop", "is_negation", "is_number", "is_entity"))


@lru_cache(maxsize=4096)  # a claim's passages are reused by its answer's other claims, not later
def passage_profile(passage: str) -> Passage:
    """`tokens(passage)` as parallel arrays with its sentences, built without a Token per
    word (the judge's hot path: every passage it segments)."""
    matches, starts, ends = word_offsets(passage)
    infos = list(map(MATCH_INFO.__getitem__, matches))
    norms = tuple(map(_norm_of, infos))
    bounds = []
    for s, e in sentence_spans(passage):
        i, j = bisect_left(starts, s), bisect_left(starts, e)
        if j > i:
            bounds.append((i, j))
    if not bounds and matches:
        bounds = [(0, len(matches))]
    return Passage(
        starts=tuple(starts), ends=tuple(ends), norms=norms,
        content=tuple(not x for x in map(_is_stop, infos)), negs=tuple(map(_is_negation, infos)),
        numbers=tuple(map(_is_number, infos)), entities=tuple(map(_is_entity, infos)), sents=tuple(bounds),
        sent_sets=tuple(frozenset(norms[i:j]) for i, j in bounds),
        all_norms=frozenset(norms),
    )
