"""The verifier's words: tokens with offsets, clause breaks, negation reach, quantities.

Words are tasks/core/text.py's (`WORD_PATTERN`, `word_info`); offsets are code points
into the text given, end-exclusive. Pure functions of the text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import partial
from operator import add
from typing import NamedTuple

from ragspan.tasks.core.text import WORD_PATTERN, WordInfo, word_info


class Word(NamedTuple):
    start: int
    end: int
    raw: str  # as written


class Token(NamedTuple):
    start: int
    end: int
    raw: str
    info: WordInfo


# tuple.__new__ directly: a named tuple without `_make`'s Python-level length check (the
# fields are zipped from parallel lists of one length), a third of tokenising's cost.
_new_word = partial(tuple.__new__, Word)
_new_token = partial(tuple.__new__, Token)


class _ByMatch(dict):
    """A WORD_PATTERN match -> its WordInfo, computed once per distinct string
    (`__missing__`): a word costs one C-level dict lookup. Cleared past `_MAX_MATCHES`
    entries (a bound on memory, not a correctness matter)."""

    def __missing__(self, match: str) -> WordInfo:
        if len(self) >= _MAX_MATCHES:
            self.clear()
        value = self[match] = word_info(match)
        return value


_MAX_MATCHES = 1 << 20
MATCH_INFO = _ByMatch()


def word_offsets(text: str) -> tuple[list[str], list[int], list[int]]:
    """(the words of `text`, their starts, their ends). A WORD_PATTERN match begins and
    ends with a word character, so it is the word as written (no punctuation to strip).

    The regex runs in C (findall, no match objects); each start is found with str.find
    from the previous match's end — exact, because everything the regex skipped between
    two matches is non-word."""
    matches = WORD_PATTERN.findall(text)
    starts: list[int] = []
    pos, find, append = 0, text.find, starts.append
    for m in matches:
        pos = find(m, pos)
        append(pos)
        pos += len(m)
    return matches, starts, list(map(add, starts, map(len, matches)))


def words(text: str) -> list[Word]:
    """Every word of `text` with its offsets."""
    raws, starts, ends = word_offsets(text)
    return list(map(_new_word, zip(starts, ends, raws)))


def tokens(text: str) -> list[Token]:
    """`words` with what the judge checks of each."""
    raws, starts, ends = word_offsets(text)
    return list(map(_new_token, zip(starts, ends, raws, map(MATCH_INFO.__getitem__, raws))))


_CLAUSE_WORDS = frozenset(["and", "but", "which", "who", "while", "whereas", "where", "when", "although", "including"])
_CLAUSE_PUNCT = re.compile(r"[,;:()\u2013\u2014]|\s-\s")


def clause_breaks(text: str, ws: Sequence[Word | Token]) -> list[bool]:
    """Per word of `text` (`ws`, in order): does a clause boundary (punctuation or a
    joining word) precede it."""
    out, prev = [], 0
    for w in ws:
        out.append(bool(_CLAUSE_PUNCT.search(text, prev, w.start)) or w.raw.lower() in _CLAUSE_WORDS)
        prev = w.end
    return out


def fold(text: str) -> str:
    """Accents dropped: 'Zürich' and 'Zurich' are one name."""
    if text.isascii():
        return text  # (no ASCII character decomposes or combines)
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


_NOT_LETTERS = re.compile(r"[\W_]+")  # (`[^\W_]` is exactly str.isalnum)


def letters(text: str) -> str:
    """The letters and digits of `text`, accents folded, casefolded: "South East" and
    "Southeast" have the same."""
    return _NOT_LETTERS.sub("", fold(text).casefold())


# A negation applies to the content words that follow it within this many tokens; the
# first of them is what it negates for certain ("not approved"), the rest may be
# ("not formally approved by the board").
NEG_SCOPE = 5
# "not only X but Y", "whether or not": negation words that negate nothing.
_NOT_NEGATING_NEXT = frozenset(["only", "just", "merely", "simply", "least"])
_NOT_NEGATING_PREV = frozenset(["or", "whether"])


class NegationReach(NamedTuple):
    strict: frozenset[str]  # the first content norm within NEG_SCOPE tokens after a negation
    loose: frozenset[str]  # every content norm in that reach
    negated: bool  # any negation that negates something
    free: frozenset[str]  # content norms that also occur outside every negation's reach


def negation_reach(text: str, toks: Sequence[Token] | None = None) -> NegationReach:
    """The content norms each negation of `text` applies to. Negations that negate
    nothing ("not only", "whether or not", a reply's "No, …") are skipped; `free` holds
    what is also stated plainly ("is not in orbit around the Earth … it orbits the Sun":
    `orbit`). `toks`: `tokens(text)` when the caller has them."""
    toks = tokens(text) if toks is None else toks
    strict: set[str] = set()
    loose: set[str] = set()
    reached: set[int] = set()
    negated = False
    for k, t in enumerate(toks):
        if not t.info.is_negation:
            continue
        nxt = toks[k + 1].raw.casefold() if k + 1 < len(toks) else ""
        prev = toks[k - 1].raw.casefold() if k > 0 else ""
        if nxt in _NOT_NEGATING_NEXT or prev in _NOT_NEGATING_PREV:
            continue
        if k == 0 and t.raw.casefold() == "no" and (nxt == "but" or text[t.end:t.end + 1] in ",.;!:-"):
            continue  # "No, …" / "No but …": a reply to a question, negating nothing that follows
        reach = [g.info.norm for g in toks[k + 1:k + 1 + NEG_SCOPE] if not g.info.is_stop]
        negated = True
        reached.update(range(k + 1, k + 1 + NEG_SCOPE))
        if reach:
            strict.add(reach[0])
            loose.update(reach)
    free = frozenset(t.info.norm for k, t in enumerate(toks) if not t.info.is_stop and k not in reached)
    return NegationReach(frozenset(strict), frozenset(loose), negated, free)


UNITS = frozenset(
    ["%", "percent", "per cent", "mm", "cm", "m", "km", "metre", "meter", "kilometre", "kilometer", "mile", "feet",
     "foot", "inch", "yard", "mg", "g", "gram", "kg", "kilogram", "ton", "tonn", "pound", "lb", "ounc", "ml", "l",
     "litr", "liter", "gallon", "second", "minut", "hour", "day", "week", "month", "year", "decad", "centuri",
     "dollar", "euro", "cent", "usd", "eur", "gbp", "yen", "rupe", "thousand", "million", "billion", "trillion",
     "mph", "kph", "kmh", "km/h", "hz", "khz", "mhz", "ghz", "kb", "mb", "gb", "tb", "w", "kw", "mw", "gw", "kwh",
     "v", "volt", "watt", "°c", "°f", "degre", "celsius", "fahrenheit", "acr", "hectar", "sq", "squar", "time",
     "fold", "point", "metr", "kilometr", "centimetr", "millimetr", "dose", "tablet", "patient", "person", "peopl",
     "employe", "user", "member", "student", "item", "request", "core", "node", "server", "replica", "byte", "kib",
     "mib", "gib"])


class Quantity(NamedTuple):
    number: str  # canonical
    unit: str  # a UNITS norm; "%" for a percent sign or "percent"
    start: int  # where the unit is written (a percent sign: with its number, "5%")
    end: int


def quantities(text: str, toks: Sequence[Token] | None = None) -> list[Quantity]:
    """Every number followed by a unit word or a percent sign. `toks`: `tokens(text)`
    when the caller has them."""
    out = []
    toks = tokens(text) if toks is None else toks
    for k, t in enumerate(toks):
        if not t.info.is_number:
            continue
        if text[t.end:t.end + 2].lstrip().startswith("%"):
            out.append(Quantity(t.info.norm, "%", t.start, text.index("%", t.end) + 1))
        elif k + 1 < len(toks):
            nxt = toks[k + 1]
            unit = nxt.info.norm
            if unit in UNITS or nxt.raw.casefold() in UNITS:
                out.append(Quantity(t.info.norm, "%" if unit in ("percent", "per cent") else unit, nxt.start, nxt.end))
    return out
