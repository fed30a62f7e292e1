"""Scoring of flagged answer characters against RAGTruth's marked ones, and the two baselines.

Pure functions over plain text and (start, end) code-point spans, no ragspan import but its
stopword list, so tests/test_ragtruth_bench.py runs them on hand-built examples.

- Per answer: an answer is flagged when any of its non-space characters is flagged; gold:
  it has any label. Balanced accuracy, and P / R / F1 of the hallucinated class.
- Per character: flagged vs marked non-space characters, counts summed over the set (micro).
- Baselines (issue 41): `lexical_spans` — the answer's content words (not stopwords) absent
  from its passages, lower-cased; `rule_spans` — "a number or capitalised word absent from
  the passages": a word of digits, or a word with a capital first letter that does not
  begin a sentence, that the passages never write the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ragspan.tasks.core.text import STOPWORDS

Span = tuple[int, int]
WORD = re.compile(r"\w+")
_SENTENCE_END = ".!?:"


# ---------------------------------------------------------------- per answer


def balanced_accuracy(pred: Sequence[bool], gold: Sequence[bool]) -> float | None:
    """Mean of the recall of each class; None when a class is absent from `gold`."""
    pos = sum(1 for g in gold if g)
    neg = len(gold) - pos
    if not pos or not neg:
        return None
    tp = sum(1 for p, g in zip(pred, gold, strict=True) if p and g)
    tn = sum(1 for p, g in zip(pred, gold, strict=True) if not p and not g)
    return (tp / pos + tn / neg) / 2


def prf(tp: int, fp: int, fn: int) -> tuple[float | None, float | None, float | None]:
    """Precision, recall, F1; None where the denominator is 0 (F1: when P or R is None)."""
    p = tp / (tp + fp) if tp + fp else None
    r = tp / (tp + fn) if tp + fn else None
    if p is None or r is None:
        return p, r, None
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def answer_scores(pred: Sequence[bool], gold: Sequence[bool]) -> dict:
    """Per answer: balanced accuracy, P / R / F1 of the hallucinated class, and the share of
    clean answers flagged anyway."""
    tp = sum(1 for p, g in zip(pred, gold, strict=True) if p and g)
    fp = sum(1 for p, g in zip(pred, gold, strict=True) if p and not g)
    fn = sum(1 for p, g in zip(pred, gold, strict=True) if not p and g)
    clean = len(gold) - sum(map(bool, gold))
    p, r, f = prf(tp, fp, fn)
    return {
        "answers": len(gold),
        "hallucinated": sum(map(bool, gold)),
        "flagged": sum(map(bool, pred)),
        "balanced_accuracy": balanced_accuracy(pred, gold),
        "precision": p,
        "recall": r,
        "f1": f,
        "clean_flagged": fp / clean if clean else None,
    }


# ---------------------------------------------------------------- per character


def mask(n: int, spans: Iterable[Span]) -> list[bool]:
    out = [False] * n
    for s, e in spans:
        for i in range(max(0, s), min(n, e)):
            out[i] = True
    return out


@dataclass
class CharCounts:
    """Non-space characters: flagged and marked (tp), flagged only (fp), marked only (fn),
    and all of them (total)."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    total: int = 0

    def add(self, text: str, flagged: Iterable[Span], marked: Iterable[Span]) -> CharCounts:
        f, m = mask(len(text), flagged), mask(len(text), marked)
        for i, c in enumerate(text):
            if c.isspace():
                continue
            self.total += 1
            if f[i] and m[i]:
                self.tp += 1
            elif f[i]:
                self.fp += 1
            elif m[i]:
                self.fn += 1
        return self

    def scores(self) -> dict:
        p, r, f = prf(self.tp, self.fp, self.fn)
        t = self.total or 1
        return {
            "precision": p,
            "recall": r,
            "f1": f,
            "flagged_share": (self.tp + self.fp) / t,
            "marked_share": (self.tp + self.fn) / t,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "chars": self.total,
        }


def any_char(text: str, spans: Iterable[Span]) -> bool:
    """Does any span hold a non-space character of `text`?"""
    return any(not c.isspace() for s, e in spans for c in text[s:e])


# ---------------------------------------------------------------- baselines


def _words(passages: Sequence[str]) -> set[str]:
    return {w for p in passages for w in WORD.findall(p)}


def lexical_spans(answer: str, passages: Sequence[str]) -> list[Span]:
    """Content words of the answer (lower-cased, not stopwords) that no passage holds."""
    have = {w.lower() for w in _words(passages)}
    return [
        m.span()
        for m in WORD.finditer(answer)
        if (w := m.group(0).lower()) not in STOPWORDS and w not in have
    ]


def _sentence_initial(answer: str, start: int) -> bool:
    before = answer[:start].rstrip()
    return not before or before[-1] in _SENTENCE_END


def rule_spans(answer: str, passages: Sequence[str]) -> list[Span]:
    """The one-line rule: a number (a word of digits) or a capitalised word that does not
    start a sentence, absent from the passages as written (case-sensitive)."""
    have = _words(passages)
    out = []
    for m in WORD.finditer(answer):
        w = m.group(0)
        if w in have:
            continue
        if w.isdigit() or (w[0].isupper() and not _sentence_initial(answer, m.start())):
            out.append(m.span())
    return out
