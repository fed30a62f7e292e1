"""Answer spans: the characters of an answer that its evidence does not support.

A judge marks, per (claim, passage), the characters of the claim the passage leaves
`unsupported` or `contradicts` (tasks/judges/base.py `ClaimMark`). Those marks travel
through the pipeline as one JSON column (`marks`: `[[start, end, kind, evidence_start,
evidence_end], ...]`, claim coordinates; the evidence in the passage's coordinates, then,
after validate_offsets, the document's, with the evidence text as a sixth item). The
diagnose step takes the marks of the passage that decided each claim and places them in
the answer — here. (The report checks every contradiction's evidence against the corpus,
as it checks every evidence span.)

Placing is exact or nothing: when a claim is the answer's own text
(`answer[answer_start:answer_end] == claim`) a mark is shifted; when a judge rewrote the
claim, the marked words are looked up inside the claim's stretch of the answer
(tasks/core/locate.py, exact then normalised) and dropped when they are not there. So
`answer[answer_start:answer_end] == text` holds for every span by construction.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Sequence

import numpy as np
from ragspan.tasks.core.locate import locate_quote

# (start, end, kind, evidence_start, evidence_end, evidence_text): one mark, claim coordinates.
Mark = tuple[int, int, str, int | None, int | None, str | None]
KINDS = ("unsupported", "contradicted")
# Character classes of an answer (answer_char_counts).
CHAR_CLASSES = ("supported", "unsupported", "contradicted", "not_checked")


def marks_json(marks: Iterable[Sequence]) -> str | None:
    """The `marks` column's value: None when there are none."""
    rows = [[int(m[0]), int(m[1]), str(m[2]), _int(m[3]), _int(m[4]), *([m[5]] if len(m) > 5 else [])]
            for m in marks]
    return json.dumps(rows, separators=(",", ":"), ensure_ascii=False) if rows else None


def parse_marks(value: str | None) -> list[Mark]:
    if not value:
        return []
    return [(int(m[0]), int(m[1]), str(m[2]), _int(m[3]), _int(m[4]), m[5] if len(m) > 5 else None)
            for m in json.loads(value)]


def placed_evidence(value: str | None, passage: str | None, base: int | None) -> str | None:
    """Marks with their evidence moved from passage to document coordinates, with its
    text; evidence outside the passage (or without a document) is dropped."""
    if not value:
        return value
    out = []
    for s, e, k, es, ee, _ in parse_marks(value):
        if passage is not None and base is not None and es is not None and ee is not None and 0 <= es < ee <= len(passage):
            out.append((s, e, k, es + base, ee + base, passage[es:ee]))
        else:
            out.append((s, e, k, None, None))
    return marks_json(out)


def _int(x: object) -> int | None:
    return None if x is None else int(x)  # type: ignore[call-overload]


def _edge(ch: str) -> bool:
    """Whitespace, punctuation, separators and controls: what a mark never starts or ends
    with (combining marks and symbols such as $ or % stay: they belong to the word)."""
    return unicodedata.category(ch)[0] in "PZC"


def _trimmed(text: str, s: int, e: int) -> tuple[int, int]:
    """The span without edge whitespace or punctuation (a mark is words, not the gaps)."""
    while s < e and _edge(text[s]):
        s += 1
    while e > s and _edge(text[e - 1]):
        e -= 1
    return s, e


def _in_answer(answer: str, claim: str, a0: int, a1: int, s: int, e: int) -> tuple[int, int] | None:
    """Where claim[s:e] sits in the answer, or None when the answer does not hold it."""
    seg = answer[a0:a1]
    if seg == claim:
        return a0 + s, a0 + e
    hint = round(s * len(seg) / max(1, len(claim)))
    found = locate_quote(seg, claim[s:e], hint)
    return None if found is None else (a0 + found[0], a0 + found[1])


def answer_spans_of_claim(answer: str, claim: str, a0: int, a1: int, marks: Sequence[Mark],
                          doc_id: str | None) -> list[dict]:
    """The answer spans of one claim (answer coordinates, sorted, non-overlapping; a
    contradicted mark wins where two overlap), each with the evidence of a contradiction.
    A contradiction without placed evidence stays, as `unsupported`: nothing is shown
    that the corpus does not hold."""
    placed: list[tuple] = []
    for s, e, kind, es, ee, ev in marks:
        if kind not in KINDS or not 0 <= s < e <= len(claim):
            continue
        at = _in_answer(answer, claim, a0, a1, s, e)
        if at is None:
            continue
        b, c = _trimmed(answer, *at)
        if c <= b:
            continue
        ok = kind == "contradicted" and doc_id is not None and es is not None and ee is not None and bool(ev)
        placed.append((b, c, "contradicted" if ok else "unsupported", es if ok else None, ee if ok else None,
                       ev if ok else None))
    return [_span(answer, b, c, kind, doc_id, es, ee, ev) for b, c, kind, es, ee, ev in _disjoint(answer, placed)]


def _disjoint(text: str, spans: list[tuple]) -> list[tuple]:
    """Overlaps resolved: contradicted first, then unsupported only where still free (each
    piece trimmed again); spans of one kind (and evidence) with only a gap between joined."""
    taken = np.zeros(max((c for _, c, *_ in spans), default=0), dtype=bool)
    out: list[tuple] = []
    for b, c, kind, *evidence in sorted(spans, key=lambda x: (x[2] != "contradicted", x[0], x[1])):
        free = ~taken[b:c]
        k = b
        while k < c:  # every free stretch of [b, c)
            if not free[k - b]:
                k += 1
                continue
            j = k
            while j < c and free[j - b]:
                j += 1
            b2, c2 = _trimmed(text, k, j)
            if c2 > b2:
                out.append((b2, c2, kind, *evidence))
            k = j
        taken[b:c] = True
    out.sort()
    joined: list[tuple] = []
    for span in out:
        if joined and not text[joined[-1][1]:span[0]].strip() and joined[-1][2:] == span[2:]:
            joined[-1] = (joined[-1][0], span[1], *span[2:])
        else:
            joined.append(span)
    return joined


def _span(answer: str, b: int, c: int, kind: str, doc_id: str | None, es: int | None, ee: int | None,
          ev: str | None) -> dict:
    contradicted = kind == "contradicted"
    return {"answer_start": b, "answer_end": c, "text": answer[b:c], "kind": kind,
            "doc_id": doc_id if contradicted else None,
            "char_start": es if contradicted else None, "char_end": ee if contradicted else None,
            "evidence_text": ev if contradicted else None}


def whole_claim(answer: str, a0: int, a1: int) -> list[dict]:
    """A claim nothing in the corpus is about: all of it is unsupported."""
    b, c = _trimmed(answer, a0, a1)
    return [_span(answer, b, c, "unsupported", None, None, None, None)] if c > b else []


def answer_char_counts(answer: str, claims: Iterable[tuple[int, int]],
                       spans: Iterable[tuple[int, int, str]]) -> dict[str, int]:
    """Non-space characters of one answer by class: inside a judged claim and not marked
    (`supported`), marked `unsupported` / `contradicted`, or in no judged claim
    (`not_checked`: text that is no claim, unjudged claims). Whitespace is not counted:
    the gaps between sentences say nothing."""
    cls = np.zeros(len(answer), dtype=np.int8)  # 0 not checked, 1 supported, 2 unsupported, 3 contradicted
    for a, b in claims:
        cls[a:b] = np.maximum(cls[a:b], 1)
    for a, b, kind in spans:
        cls[a:b] = np.maximum(cls[a:b], 3 if kind == "contradicted" else 2)
    counted = np.fromiter((not ch.isspace() for ch in answer), dtype=bool, count=len(answer))
    n = np.bincount(cls[counted], minlength=4)
    return {"supported": int(n[1]), "unsupported": int(n[2]), "contradicted": int(n[3]), "not_checked": int(n[0])}
