"""WiCE's word-level gold (`non_supported_tokens_{train,dev}`) and the word score of marks.

Shared by the answer-span benchmark (benchmarks/answer_spans/run.py), which reports it, and
the fit of the answer-span word model (training/answer_marks.py), which chooses its C and
threshold by it on train: both score marks the same way. Read-only from `RAGSPAN_BENCH_DATA`
(claims.DATA), never copied into the repository.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from training.readers.claims import DATA

Span = tuple[int, int]


def wice(split: str) -> list[dict]:
    path = DATA / "wice_dev" / f"non_supported_tokens_{split}.jsonl"
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def wice_gold(r: dict) -> list[tuple[Span, bool]]:
    """(claim span, unsupported) per gold token with a word character."""
    claim, pos, out = r["claim"], 0, []
    for tok, bad in zip(r["claim_tokens"], r["non_supported_spans"], strict=True):
        i = claim.find(tok, pos)
        if i < 0:
            continue
        pos = i + len(tok)
        if re.search(r"\w", tok):
            out.append(((i, pos), bool(bad)))
    return out


def score(cases: Iterable[tuple[list[tuple[Span, bool]], Iterable[Span]]]) -> dict[str, float]:
    """Word P/R/F1 (a gold word is marked when any of its characters is) and char F1."""
    tp = fp = fn = ctp = cfp = cfn = 0
    for gold, pred_spans in cases:
        pred = {c for s, e in pred_spans for c in range(s, e)}
        gchars: set[int] = set()
        words: set[int] = set()
        for (s, e), bad in gold:
            words.update(range(s, e))
            hit = any(c in pred for c in range(s, e))
            if bad:
                gchars.update(range(s, e))
            tp += hit and bad
            fp += hit and not bad
            fn += (not hit) and bad
        pred &= words  # characters outside every gold word (spaces, punctuation) are not scored
        ctp += len(pred & gchars)
        cfp += len(pred - gchars)
        cfn += len(gchars - pred)
    return {**_prf(tp, fp, fn), "char_f1": _prf(ctp, cfp, cfn)["f1"]}


def _prf(tp: int, fp: int, fn: int) -> dict[str, float]:
    p, r = tp / max(1, tp + fp), tp / max(1, tp + fn)
    return {"precision": round(p, 3), "recall": round(r, 3), "f1": round(2 * p * r / max(1e-9, p + r), 3)}
