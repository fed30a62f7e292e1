"""Locating a retrieved item given only as text: exact, then whitespace-normalised, mapped back to raw offsets."""

from __future__ import annotations

import bisect

import pandas as pd
from ragspan.tasks.io.load.files import _SEP, _WS

# --------------------------------------------------------------------------- locating text


class _TextIndex:
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
    return _TextIndex(corpus["doc_id"].tolist(), corpus["text"].tolist()).locate(text, doc_id)
