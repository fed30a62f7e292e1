"""Probe for issue "which characters of the answer are wrong": how well word matching alone
marks the words of a claim that its evidence does not support, on WiCE's human labels.

    .venv/bin/python benchmarks/answer_spans/probe.py

Read at run time from the data directory (WiCE `non_supported_tokens_{train,dev}.jsonl`:
partially supported sub-claims, each word marked supported or not), never copied. A
claim is judged against its whole cited page as the local judge does (tasks/judges/
verifier/features.py); the marked words are compared with the gold per word (precision,
recall, F1 of unsupported words; punctuation skipped) and per character (F1).

Variants (chosen on train, reported on dev too):
- `window` — the issue's baseline: every content word absent from the best 1–2 sentence window;
- `window+merge` — and the stopwords between two marked words (gold marks phrases);
- `fit` — absent from the window and from the sentences that best cover the claim (as many
  as it has clauses), i.e. support assembled over the page;
- `clause:T` — a clause (split at , ; ( ) and joining words) holding less than T of its
  rarity-weighted content words is marked whole; otherwise its absent words.

This is a measurement only: nothing here is in ragspan's outputs yet.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _real_claims import DATA
from ragspan.tasks.core.text import word_info
from ragspan.tasks.judges.verifier.features import (
    _clause_words,
    _greedy_union,
    _words,
    claim_profile,
    pair_features,
    passage_profile,
)

SPLITS = ("train", "dev")
VARIANTS = ("window", "window+merge", "fit", "fit+merge", "clause:0.3", "clause:0.5")


def load(split: str) -> list[dict]:
    path = DATA / "wice_dev" / f"non_supported_tokens_{split}.jsonl"
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _present(claim: str, passage: str, fit: bool) -> tuple[object, frozenset[str]] | None:
    prof = claim_profile(claim, "", True)
    if prof is None:
        return None
    r = pair_features(prof, passage)
    p = passage_profile(passage)
    present = frozenset(p.norms[r.window[0]:r.window[1]]) if r.window else frozenset()
    if fit:
        cand = [k for k, s in enumerate(p.sent_sets) if prof.content & s]
        present = present | _greedy_union(prof, p.sent_sets, min(5, max(1, len(prof.clauses))), cand)
    return prof, present


def marked(claim: str, passage: str, variant: str) -> list[tuple[int, int]]:
    """Character spans of the claim marked unsupported."""
    got = _present(claim, passage, variant.startswith(("fit", "clause")))
    if got is None:
        return []
    prof, present = got
    if variant.startswith("clause"):
        threshold = float(variant.split(":")[1])
        clauses, cur = [], []
        for s, e, raw, sep in _clause_words(claim):
            if sep and cur:
                clauses.append(cur)
                cur = []
            cur.append((s, e, raw))
        if cur:
            clauses.append(cur)
        out = []
        for c in clauses:
            content = [(s, e, word_info(raw)) for s, e, raw in c if not word_info(raw)[4]]
            if not content:
                continue
            total = sum(prof.weights.get(f[0], 1.0) for _, _, f in content)
            found = sum(prof.weights.get(f[0], 1.0) for _, _, f in content if f[0] in present)
            if found / total < threshold:
                out.append((c[0][0], c[-1][1]))
            else:
                out += [(s, e) for s, e, f in content if f[0] not in present]
        return out
    toks = _words(claim)
    flags: list[bool | None] = [None if word_info(raw)[4] else word_info(raw)[0] not in present for _, _, raw in toks]
    if "merge" in variant:
        content_at = [i for i, f in enumerate(flags) if f is not None]
        for a, b in itertools.pairwise(content_at):
            if flags[a] and flags[b]:
                for k in range(a + 1, b):
                    flags[k] = True
    return [(s, e) for (s, e, _), f in zip(toks, flags, strict=True) if f]


def _offsets(claim: str, tokens: list[str]) -> list[tuple[int, int] | None]:
    pos, out = 0, []
    for t in tokens:
        i = claim.find(t, pos)
        if i < 0:
            out.append(None)
            continue
        out.append((i, i + len(t)))
        pos = i + len(t)
    return out


def score(rows: list[dict], variant: str) -> dict[str, float]:
    tp = fp = fn = 0
    ctp = cfp = cfn = 0
    for r in rows:
        claim = r["claim"]
        pred = {c for s, e in marked(claim, "\n".join(r["evidence"]), variant) for c in range(s, e)}
        gold: set[int] = set()
        for o, g in zip(_offsets(claim, r["claim_tokens"]), r["non_supported_spans"], strict=True):
            if o is None or not re.search(r"\w", claim[o[0]:o[1]]):
                continue
            hit = any(c in pred for c in range(*o))
            if g:
                gold.update(range(*o))
            tp += hit and g
            fp += hit and not g
            fn += (not hit) and g
        ctp += len(pred & gold)
        cfp += len(pred - gold)
        cfn += len(gold - pred)

    def f1(a: int, b: int, c: int) -> tuple[float, float, float]:
        p, rec = a / max(1, a + b), a / max(1, a + c)
        return p, rec, 2 * p * rec / max(1e-9, p + rec)

    p, rec, f = f1(tp, fp, fn)
    return {"precision": round(p, 3), "recall": round(rec, 3), "token_f1": round(f, 3),
            "char_f1": round(f1(ctp, cfp, cfn)[2], 3)}


def main() -> int:
    print(f"{'split':<6}{'variant':<14}{'P':>7}{'R':>7}{'tok F1':>8}{'chr F1':>8}")
    for split in SPLITS:
        rows = load(split)
        for v in VARIANTS:
            s = score(rows, v)
            print(f"{split:<6}{v:<14}{s['precision']:>7.3f}{s['recall']:>7.3f}{s['token_f1']:>8.3f}{s['char_f1']:>8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
