"""Finding text in text — the one place for it, at two levels.

- `locate_quote(passage, quote, hint)`: a judge's quote inside the passage it was shown.
  Exact first (nearest to the judge's own offset), then under the full normalisation of
  `core.text.normalize_with_map` (NFKC, casefold, quote/dash folding, whitespace runs),
  mapped back to raw offsets. Models re-type quotes, so this is lenient.
- `CorpusTextIndex` / `locate_text(corpus, text, doc_id)`: a retrieved item given only as
  text, anywhere in the corpus. Exact first, then with whitespace runs normalised only:
  a retriever copies chunk text verbatim, so anything looser would accept text that is
  not in the corpus.

Both return raw code-point offsets, end-exclusive, whose slice is what was asked for up
to the normalisation used.
"""

from __future__ import annotations

import bisect
import re

import pandas as pd
from ragspan.tasks.core.text import normalize, normalize_with_map

_WS = re.compile(r"\s+")
_SEP = "\x00"  # joins documents for one corpus-wide str.find; a query holding it is searched per document


def locate_quote(passage: str, quote: str, hint: int | None) -> tuple[int, int, str] | None:
    """(start, end, match) of `quote` in `passage`, raw offsets; None when absent."""
    if not quote or not quote.strip():
        return None
    if hint is not None and passage[hint : hint + len(quote)] == quote:
        return hint, hint + len(quote), "exact"
    starts = _all_occurrences(passage, quote)
    if starts:
        best = min(starts, key=lambda s: abs(s - hint)) if hint is not None else starts[0]
        return best, best + len(quote), "exact"
    norm_passage, starts, ends = normalize_with_map(passage)
    norm_quote = normalize(quote)
    if not norm_quote:
        return None
    for i in _all_occurrences(norm_passage, norm_quote):
        start, end = starts[i], ends[i + len(norm_quote) - 1]
        # A character that expands under NFKC ("ﬁ" -> "fi") maps each of its normalised
        # characters to the whole raw character, so a match that takes only part of the
        # expansion would widen to a slice whose normal form is not the quote's: skip it.
        if normalize(passage[start:end]) == norm_quote:
            return start, end, "normalized"
    return None


def _all_occurrences(text: str, sub: str) -> list[int]:
    out, i = [], text.find(sub)
    while i >= 0:
        out.append(i)
        i = text.find(sub, i + 1)
    return out


class CorpusTextIndex:
    """The corpus prepared for repeated substring search (exact, then whitespace-normalised).

    Documents are joined with NUL so one C-level `str.find` scans the whole corpus
    in corpus order; the normalised copy is built only if some query needs it.
    """

    def __init__(self, doc_ids: list[str], texts: list[str]):
        self.ids = doc_ids
        self.texts = texts
        self.pos = {d: i for i, d in enumerate(doc_ids)}
        self._joined: tuple[str, list[int]] | None = None
        self._norm: tuple[str, list[int]] | None = None
        self._memo: dict[tuple[str, str | None], tuple[str, int, int] | None] = {}

    @staticmethod
    def _join(texts: list[str]) -> tuple[str, list[int]]:
        starts, at = [], 0
        for t in texts:
            starts.append(at)
            at += len(t) + 1
        return _SEP.join(texts), starts

    def _find_all_docs(self, query: str, normalised: bool) -> tuple[int, int] | None:
        if normalised:
            if self._norm is None:
                self._norm = self._join([_WS.sub(" ", t) for t in self.texts])
            joined, starts = self._norm
        else:
            if self._joined is None:
                self._joined = self._join(self.texts)
            joined, starts = self._joined
        if _SEP in query:  # could straddle two documents in the joined text: go one by one
            for i, t in enumerate(self.texts):
                at = (_WS.sub(" ", t) if normalised else t).find(query)
                if at >= 0:
                    return i, at
            return None
        at = joined.find(query)
        if at < 0:
            return None
        i = bisect.bisect_right(starts, at) - 1
        return i, at - starts[i]

    def locate(self, text: str, doc_id: str | None) -> tuple[str, int, int] | None:
        key = (text, doc_id)
        if key not in self._memo:
            self._memo[key] = self._locate(text, doc_id)
        return self._memo[key]

    def _locate(self, text: str, doc_id: str | None) -> tuple[str, int, int] | None:
        if not text.strip():
            return None
        if doc_id is not None and doc_id not in self.pos:
            return None
        # 1. exact
        if doc_id is not None:
            i, at = self.pos[doc_id], self.texts[self.pos[doc_id]].find(text)
            hit = (i, at) if at >= 0 else None
        else:
            hit = self._find_all_docs(text, normalised=False)
        if hit is not None:
            return self.ids[hit[0]], hit[1], hit[1] + len(text)
        # 2. whitespace runs normalised to one space; ends trimmed so the match starts
        #    and ends on non-space characters (their raw positions are unambiguous).
        query = _WS.sub(" ", text.strip())
        if doc_id is not None:
            i = self.pos[doc_id]
            at = _WS.sub(" ", self.texts[i]).find(query)
            hit = (i, at) if at >= 0 else None
        else:
            hit = self._find_all_docs(query, normalised=True)
        if hit is None:
            return None
        i, at = hit
        doc = self.texts[i]
        start = _norm_to_raw(doc, at)
        end = _norm_to_raw(doc, at + len(query) - 1) + 1
        return self.ids[i], start, end


def _norm_to_raw(doc: str, n_off: int) -> int:
    """Raw index of the character at `n_off` in `_WS.sub(" ", doc)`.

    Each whitespace run of length L became one space, so every run that lies before
    `n_off` shifts the raw index by L - 1.
    """
    shift = 0
    for m in _WS.finditer(doc):
        if m.start() - shift >= n_off:
            break
        shift += m.end() - m.start() - 1
    return n_off + shift


def locate_text(corpus: pd.DataFrame, text: str, doc_id: str | None) -> tuple[str, int, int] | None:
    """Where `text` sits in the corpus: (doc_id, char_start, char_end), or None.

    Exact substring first (within `doc_id` when given, else the first document in
    corpus order that contains it; first occurrence in that document), then the same
    with whitespace runs normalised: any run of whitespace in `text` matches any run
    in the document, leading/trailing whitespace of `text` is ignored, and the
    offsets returned are raw offsets whose slice equals `text` up to whitespace.
    None for blank text or an unknown doc_id.
    """
    return CorpusTextIndex(corpus["doc_id"].tolist(), corpus["text"].tolist()).locate(text, doc_id)
