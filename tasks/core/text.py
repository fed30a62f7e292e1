"""Text primitives shared by the steps: sentences, tokens with offsets, normalisation.

Every offset here is a Python `str` index (a Unicode code point), end-exclusive —
the unit of the whole project (docs/design.md §1).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING, NamedTuple

from sentencex import get_sentence_boundaries

if TYPE_CHECKING:
    from nltk.stem.snowball import SnowballStemmer

# Words, keeping numbers like 1,200 / 3.5 / v2.4.1 and contractions in one token.
WORD_PATTERN = re.compile(r"\w+(?:[.,'’:/-]\w+)*", re.UNICODE)
_HAS_DIGIT = re.compile(r"\d")
_NEGATIONS = frozenset(
    ["not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "cannot", "can't", "won't", "don't", "doesn't", "didn't", "isn't", "aren't", "wasn't", "weren't", "hasn't", "haven't", "hadn't", "shouldn't", "wouldn't", "couldn't", "without", "unsupported"]
)
STOPWORDS = frozenset(
    ["a", "an", "the", "and", "or", "but", "if", "then", "than", "that", "this", "these", "those", "there", "here", "of", "in", "on", "at", "to", "for", "from", "by", "with", "as", "is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did", "has", "have", "had", "having", "it", "its", "it's", "they", "them", "their", "theirs", "he", "she", "his", "her", "him", "we", "our", "you", "your", "i", "me", "my", "which", "who", "whom", "whose", "what", "when", "where", "why", "how", "all", "any", "both", "each", "few", "more", "most", "other", "some", "such", "only", "own", "same", "so", "too", "very", "can", "will", "just", "should", "would", "could", "may", "might", "must", "shall", "also", "into", "about", "over", "under", "again", "further", "once", "up", "down", "out", "off", "above", "below", "between", "through", "during", "before", "after", "until", "while", "because", "per", "via", "whether", "yes"]
)
_NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
    "fifteen": "15", "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50",
    "sixty": "60", "ninety": "90", "hundred": "100", "thousand": "1000",
}


@lru_cache(maxsize=1)
def _stemmer() -> SnowballStemmer:
    # nltk takes ~0.3 s to import: made at the first stem, not by every module importing this
    # one (the loader locates text with it; an unchanged re-run stems nothing).
    from nltk.stem.snowball import SnowballStemmer

    return SnowballStemmer("english")


@lru_cache(maxsize=262144)
def stem(word: str) -> str:
    """Snowball (Porter2) English stem of a lowercased word: 'refunds'/'refunded' -> 'refund'."""
    return _stemmer().stem(word)


def canonical_number(raw: str) -> str | None:
    """'1,200' -> '1200', '3.50' -> '3.5', 'twelve' -> '12'; None when not a number."""
    low = raw.lower()
    if low in _NUMBER_WORDS:
        return _NUMBER_WORDS[low]
    cleaned = raw.replace(",", "").replace("’", "").replace("'", "")
    if re.fullmatch(r"\d+(?:\.\d+)?", cleaned):
        if "." in cleaned:
            cleaned = cleaned.rstrip("0").rstrip(".")
        return cleaned.lstrip("0") or "0"
    return None


class WordInfo(NamedTuple):
    """What the judge checks of one surface word."""

    norm: str  # casefolded Snowball stem; a number canonical ("1,200" -> "1200")
    is_number: bool
    is_entity: bool  # capitalised / acronym / alphanumeric code: must agree for `supported`
    is_negation: bool
    is_stop: bool  # a stopword or a negation: not a content word


@lru_cache(maxsize=1 << 18)
def word_info(raw: str) -> WordInfo:
    """What the judge checks of one surface word; words repeat across a corpus, so this is
    computed once per distinct word."""
    low = unicodedata.normalize("NFKC", raw).casefold().replace("’", "'")
    base = low.removesuffix("'s")
    num = canonical_number(raw)
    has_digit = _HAS_DIGIT.search(raw) is not None
    # Codes like "v2.4", "27-30%" or "4:51" must agree as names do: they are not numbers
    # the judge can compare by value, and a swapped one is a different fact.
    is_entity = num is None and (raw[0].isupper() or has_digit)
    return WordInfo(
        num if num is not None else stem(base),
        num is not None,
        is_entity and base not in STOPWORDS and low not in STOPWORDS,
        low in _NEGATIONS or low.endswith("n't"),
        low in STOPWORDS or base in STOPWORDS or low in _NEGATIONS,
    )


class _ByRawMatch(dict):
    """raw `WORD_PATTERN` match → what the hot loops need of it, computed once per distinct
    string (`__missing__`), so the per-token work is one C-level dict lookup. Cleared
    when it grows past `_MAX_RAW` entries (a bound on memory, not a correctness matter)."""

    def __init__(self, compute):
        super().__init__()
        self._compute = compute

    def __missing__(self, raw: str):
        if len(self) >= _MAX_RAW:
            self.clear()
        value = self[raw] = self._compute(raw)
        return value


_MAX_RAW = 1 << 20


def _content_of(match: str) -> str:
    """The norm of a raw match when it is a content word, else ''."""
    raw = match.rstrip(".,:/-'’")
    if not raw:
        return ""
    f = word_info(raw)
    return "" if f.is_stop else f.norm


def _norm_of(match: str) -> str:
    """The norm of a raw match (stopwords included), '' when nothing is left of it."""
    raw = match.rstrip(".,:/-'’")
    return word_info(raw).norm if raw else ""


_CONTENT = _ByRawMatch(_content_of)
_NORM = _ByRawMatch(_norm_of)


def norm_set(text: str) -> frozenset[str]:
    """Every token norm of `text` (stopwords included), as a set — a superset of the
    norms of each of its sentence windows, for a cheap upper bound on coverage."""
    return frozenset(map(_NORM.__getitem__, WORD_PATTERN.findall(text))) - {""}


def content_norms(text: str) -> list[str]:
    """Norms of the non-stopword words of `text`, in order, for indexing (no match
    objects; one dict lookup per word)."""
    return [n for n in map(_CONTENT.__getitem__, WORD_PATTERN.findall(text)) if n]


@lru_cache(maxsize=16384)
def sentence_spans(text: str) -> tuple[tuple[int, int], ...]:
    """(start, end) of each sentence, whitespace trimmed, covering all words of `text`.

    Line breaks end a sentence too (bullet lists, headers), then sentencex (Wikimedia's
    rule-based segmenter, abbreviation-aware) splits each line."""
    spans: list[tuple[int, int]] = []
    for line in re.finditer(r"[^\r\n]+", text):
        base = line.start()
        for s, e in _line_sentences(line.group(0)):
            s, e = base + s, base + e
            while s < e and text[s].isspace():
                s += 1
            while e > s and text[e - 1].isspace():
                e -= 1
            if e > s:
                spans.append((s, e))
    return tuple(spans)


_OTHER_SPACE = re.compile(r"[^\S ]")
_FALLBACK_END = re.compile(r"(?<=[.!?。！？])\s+")


def _line_sentences(line: str) -> list[tuple[int, int]]:
    """sentencex boundaries of one line. Unicode spaces become ASCII spaces first (same
    code-point length, so offsets hold): sentencex's Rust core can panic on a multi-byte
    space (seen with NBSP). If it panics anyway, a plain end-punctuation split is used."""
    safe = _OTHER_SPACE.sub(" ", line)
    try:
        return [(b["start_index"], b["end_index"]) for b in get_sentence_boundaries("en", safe)]
    except BaseException as exc:  # pyo3 PanicException derives from BaseException
        if type(exc).__name__ != "PanicException":
            raise
        cuts = [0, *(m.end() for m in _FALLBACK_END.finditer(line)), len(line)]
        return [(a, b) for a, b in pairwise(cuts) if b > a]


# Characters that the quote normalisation folds (documented in docs/offsets.md).
_FOLD = str.maketrans(
    {
        "‘": "'", "’": "'", "‚": "'", "‛": "'", "`": "'", "´": "'",
        "“": '"', "”": '"', "„": '"', "‟": '"', "«": '"', "»": '"',
        "‐": "-", "‑": "-", "‒": "-", "–": "-", "—": "-", "―": "-", "−": "-",
        "\u00ad": None, "\u200b": None, "\u200c": None, "\u200d": None, "\ufeff": None,
    }
)


def normalize_with_map(text: str) -> tuple[str, list[int], list[int]]:
    """Normalised text and, per normalised character, the raw [start, end) it came from.

    Normalisation: NFKC and casefold per cluster (a character with its combining marks,
    so 'e' + U+0301 and 'é' meet), quote/dash folding, soft hyphen and zero-width
    characters dropped, whitespace runs collapsed to one space, ends trimmed. A match
    [i, j) in the normalised text is the raw slice [starts[i], ends[j-1])."""
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    pending_space: int | None = None
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            if out and pending_space is None:
                pending_space = i
            i += 1
            continue
        j = i + 1
        while j < n and unicodedata.combining(text[j]):
            j += 1
        folded = unicodedata.normalize("NFKC", text[i:j]).casefold().translate(_FOLD)
        folded = "".join(c for c in folded if not c.isspace())
        if folded:
            if pending_space is not None:
                out.append(" ")
                starts.append(pending_space)
                ends.append(pending_space + 1)
                pending_space = None
            for c in folded:
                out.append(c)
                starts.append(i)
                ends.append(j)
        i = j
    return "".join(out), starts, ends


def normalize(text: str) -> str:
    return normalize_with_map(text)[0]
