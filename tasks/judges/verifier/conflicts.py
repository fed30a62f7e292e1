"""Conflicts: THE window states the claim with a number, unit, name or negation changed.

One detector per rule, each returning the clashes it found, located: the claim's word
(offsets into the claim as written) and the window's differing word (passage offsets).
The judge's conflict features are "found any" (features.py, in a window about the
claim); answer spans mark the located ones as contradicted (marks.py). A rule can fire
where no word of the answer's own shows it (a word a short answer's statement takes
from its question; a figure the claim repeats from it): such a clash has no spans.
Pure functions of the claim's and the passage's profiles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import NamedTuple

from ragspan.tasks.judges.verifier.profiles import Claim, Passage, passage_norms
from ragspan.tasks.judges.verifier.tokens import (
    NEG_SCOPE,
    NegationReach,
    Token,
    fold,
    letters,
    negation_reach,
    quantities,
    tokens,
)

NUMBER, UNIT, NAME, NEGATION = "num_new_conflict", "unit_conflict", "ent_conflict", "neg_conflict"

Span = tuple[int, int]


class Clash(NamedTuple):
    kind: str  # NUMBER | UNIT | NAME | NEGATION (the judge's feature names, verifier.CONFLICTS)
    claim: Span | None  # the claim's word; None: no word of the answer's own shows it
    window: Span | None  # the window's differing word; None with `claim`


WindowTokens = Callable[[], list[Token]]


def window_clashes(claim: Claim, p: Passage, passage: str, i: int, j: int) -> tuple[Clash, ...]:
    """Every clash between the claim and THE window (token range [i, j) of the passage),
    rule by rule in a fixed order (a word two rules locate keeps the later one's evidence)."""
    base = p.starts[i]
    wtext = passage[base:p.ends[j - 1]]
    wtoks = _on_first_use(partial(tokens, wtext))  # the window's tokens: most windows need none
    return (*number_clashes(claim, p, i, j), *unit_clashes(claim, wtext, wtoks, base),
            *name_clashes(claim, p, i, j, wtext, passage), *negation_clashes(claim, p, i, j, wtext, wtoks))


def _on_first_use(make: Callable[[], list[Token]]) -> WindowTokens:
    """`make()`, called at the first call only (functools.cache, made per window, cost more
    than most windows' whole check)."""
    made: list[list[Token]] = []

    def get() -> list[Token]:
        if not made:
            made.append(make())
        return made[0]

    return get


def _found_unlocated(kind: str, located: list[Clash]) -> list[Clash]:
    return located or [Clash(kind, None, None)]


# Where a clash's evidence is chosen among several candidate words of the window: the
# one with a word of the claim within this many tokens (the same slot of the sentence).
_ANCHOR_REACH = 3


def _nearest(cands: list[int], norms: Sequence[str], anchors: frozenset[str]) -> int:
    """Of the candidate token indices into `norms`, the one next to a word of the claim."""
    for k in cands:
        if anchors & set(norms[max(0, k - _ANCHOR_REACH):k + 1 + _ANCHOR_REACH]):
            return k
    return cands[0]


def _neighbours(toks: Sequence[Token], k: int) -> frozenset[str]:
    """Content norms of the claim within reach of its token k."""
    lo, hi = max(0, k - _ANCHOR_REACH), k + 1 + _ANCHOR_REACH
    return frozenset(t.info.norm for t in toks[lo:hi] if not t.info.is_stop) - {toks[k].info.norm}


# ---------------------------------------------------------------------------- numbers
_NUMBER_TOLERANCE = 0.05  # "3.2 million" vs "3.17 million": the same figure, rounded


def _as_float(norm: str) -> float | None:
    try:
        return float(norm)
    except ValueError:
        return None


def _significant(norm: str) -> int:
    return len(norm.replace(".", "").strip("0"))


def rounds_to(claimed: str, stated: str) -> bool:
    """The claim's number is the window's rounded: fewer significant digits, within 5 %
    ("3.2 million" for "3.17 million"); 1999 is never 1998."""
    a, b = _as_float(claimed), _as_float(stated)
    if a is None or b is None or _significant(claimed) >= _significant(stated):
        return False
    return abs(a - b) <= _NUMBER_TOLERANCE * max(abs(a), abs(b))


def number_clashes(claim: Claim, p: Passage, i: int, j: int) -> list[Clash]:
    """A number the claim adds is not in the window (nor a rounding of one), and the
    window gives another number: the figure was changed. Evidence: the window's other
    number next to the claim word's neighbours."""
    if not claim.new_numbers:
        return []
    window = {p.norms[k] for k in range(i, j) if p.numbers[k]}
    others = [k for k in range(i, j) if p.numbers[k] and p.norms[k] not in claim.numbers]
    if not others:
        return []
    changed = {x for x in claim.new_numbers - window if not any(rounds_to(x, w) for w in window)}
    if not changed:
        return []
    located = []
    for k, t in enumerate(claim.written):
        if t.info.is_number and t.info.norm in changed:
            x = _nearest(others, p.norms, _neighbours(claim.written, k))
            located.append(Clash(NUMBER, (t.start, t.end), (p.starts[x], p.ends[x])))
    return _found_unlocated(NUMBER, located)


# ------------------------------------------------------------------------------ units
def unit_clashes(claim: Claim, wtext: str, wtoks: WindowTokens, base: int) -> list[Clash]:
    """The window gives a number of the claim with another unit and never with the
    claim's. Evidence: the first unit the window gives that number."""
    if not claim.quantities:
        return []
    win = quantities(wtext, wtoks())
    out = []
    for q in claim.quantities:
        stated = [w for w in win if w.number == q.number]
        if stated and all(w.unit != q.unit for w in stated):
            # a polar answer's quantities are its statement's: no word of the answer shows them
            at = (q.start, q.end) if claim.polar is None else None
            out.append(Clash(UNIT, at, (stated[0].start + base, stated[0].end + base) if at else None))
    return out


# ------------------------------------------------------------------------------ names
def names_found(claim: Claim, present: frozenset[str], text: str) -> float:
    """Share of the claim's own names found in `text` under any spelling (accents folded)."""
    if not claim.name_spellings:
        return 1.0
    found = [bool(sp & present) for sp in claim.name_spellings]
    if not all(found):
        folded = passage_norms(fold(text))
        # "Southeast" for "South East": the name's letters run together in the text.
        squeezed = letters(text)
        found = [f or bool(sp & folded) or raw in squeezed
                 for f, sp, raw in zip(found, claim.name_spellings, claim.name_letters, strict=True)]
    return sum(found) / len(found)


def name_clashes(claim: Claim, p: Passage, i: int, j: int, wtext: str, passage: str) -> list[Clash]:
    """A name the claim adds is in no spelling in the window, which names someone or
    something else the claim does not (evidence: that name, next to the claim word's
    neighbours); for a claim of several clauses (whose names may sit in other sentences)
    the name must be missing from the whole passage. Else a slot clash (`slot_clashes`)."""
    if not claim.name_spellings and not claim.name_slots:
        return []  # no name of its own to miss, no slot to fill: nothing to find
    # The window's words are the passage's tokens [i, j) (a window starts and ends on a
    # word: tokenising its text gives the same words); a capitalised word is a name unless
    # it opens the window (an all-capitals one is a name there too).
    wnorms, numbers = p.norms[i:j], p.numbers[i:j]
    named = [k > 0 or passage[p.starts[i]:p.ends[i]].isupper() for k in range(j - i)]
    entities = [e and named[k] for k, e in enumerate(p.entities[i:j])]
    others = [k for k, e in enumerate(entities) if e and not numbers[k] and wnorms[k] not in claim.content]
    slots = [e or n for e, n in zip(entities, numbers, strict=True)]
    if names_found(claim, frozenset(p.norms[i:j]), wtext) >= 1.0 or (
            len(claim.clauses) > 1 and names_found(claim, p.all_norms, passage) >= 1.0):
        if next(slot_clashes(claim, wnorms, slots), None) is None:
            return []
    elif not others:
        return []
    located = []
    if others:
        wset, squeezed = frozenset(wnorms), letters(wtext)
        for spellings, name_letters in zip(claim.name_spellings, claim.name_letters, strict=True):
            if spellings & wset or name_letters in squeezed:
                continue
            for k, t in enumerate(claim.written):
                if t.info.norm in spellings:
                    x = _nearest(others, wnorms, _neighbours(claim.written, k))
                    located.append(Clash(NAME, (t.start, t.end), (p.starts[i + x], p.ends[i + x])))
    if not located:
        for name, x in slot_clashes(claim, wnorms, slots):
            located += [Clash(NAME, (t.start, t.end), (p.starts[i + x], p.ends[i + x]))
                        for t in claim.written if t.info.norm == name]
    return _found_unlocated(NAME, located)


_SLOT_REACH = 3  # "President Obama" is stated by "President Barack Obama"


def slot_clashes(claim: Claim, norms: Sequence[str], names: list[bool]) -> Iterator[tuple[str, int]]:
    """Every name is there, but in another place: where the claim has "Columbia
    Maryland", the window has "Columbia University" (and Maryland elsewhere); where it has
    "Nov. 21, 2015", the window "Nov. 21, 2014". A content word next to a name or number
    of the claim is, in the window, next to another name or number and never within
    reach of the claim's. Yields (the claim's name or number, the index in `norms` of the
    other one standing in its place)."""
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


# -------------------------------------------------------------------------- negations
_NO_REACH = NegationReach(frozenset(), frozenset(), False, frozenset())


def negation_clashes(claim: Claim, p: Passage, i: int, j: int, wtext: str, wtoks: WindowTokens) -> list[Clash]:
    """Polar answers: the window's negation of the statement's words differs from the
    answer's (evidence for the polar word: the window's first negation, else its first
    word of the claim). Otherwise: the claim negates a word the window states un-negated
    (the claim's negation against that word), or the window negates a word the claim
    states un-negated (the claim's word against the window's negation before it)."""
    # (a window without a negation word negates nothing: its reach is empty)
    w = negation_reach(wtext, wtoks()) if any(p.negs[i:j]) else _NO_REACH
    if claim.polar is not None:
        # "Yes"/"No" to a question the window states (nearly word for word): does the
        # window negate the statement's words as the answer does?
        if claim.negated == bool(w.loose & claim.content):
            return []
        negs = [k for k in range(i, j) if p.negs[k]]
        hits = [k for k in range(i, j) if p.norms[k] in claim.content]
        x = (negs or hits or [i])[0]
        first = claim.written[0]
        return [Clash(NEGATION, (first.start, first.end), (p.starts[x], p.ends[x]))]
    plain = (claim.neg_strict & frozenset(p.norms[i:j])) - w.loose  # negated by the claim only
    # (a word the window negates once and states plainly elsewhere is not contradicted)
    by_window = (w.strict & claim.content) - claim.neg_loose - w.free  # negated by the window only
    if not plain and not by_window:
        return []
    shown = by_window - claim.asked  # a word from the question is the question's, not the answer's
    located = []
    for k, t in enumerate(claim.written):
        if t.info.is_negation:
            target = next((g.info.norm for g in claim.written[k + 1:k + 1 + NEG_SCOPE] if not g.info.is_stop), None)
            at = [x for x in range(i, j) if p.norms[x] == target]
            if target in plain and at:
                located.append(Clash(NEGATION, (t.start, t.end), (p.starts[at[0]], p.ends[at[0]])))
        elif not t.info.is_stop and t.info.norm in shown:
            at = [x for x in range(i, j) if p.norms[x] == t.info.norm and any(p.negs[max(i, x - NEG_SCOPE):x])]
            if at:
                n = max(y for y in range(max(i, at[0] - NEG_SCOPE), at[0]) if p.negs[y])
                located.append(Clash(NEGATION, (t.start, t.end), (p.starts[n], p.ends[n])))
    return _found_unlocated(NEGATION, located)
