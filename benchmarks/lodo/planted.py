"""Planted failures in long documents: one name, number, date, unit or negation changed.

From every WiCE cited page of at least 5,000 characters (real Wikipedia text, read from
`../shared/data` like the sets), sentences of 8–60 words are taken as claims in five
changed forms and unchanged (the control), judged against the page split into passages
of 8 sentences, all in context. A changed claim must not be supported by any passage; the
control should be. Nothing here is used to fit anything: it is reported only.

Changes (seeded, deterministic):
- name: a capitalised name (not sentence-initial) replaced by another name of the page;
- number: a number that is not a year changed by a factor 1.5–3 (rounded to an integer);
- date: a year moved by 1–9 years;
- unit: a number's unit replaced by another of its kind (km↔miles, % ↔ points, …);
- negation: "not" inserted after the first is/was/are/were/has/had/can/will/did, or an
  existing "not" / "n't" removed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from ragspan.tasks.core.text import sentence_spans

from training.readers import lodo_sets

MIN_DOC = 5000
PASSAGE_SENTENCES = 8
KINDS = ("name", "number", "date", "unit", "negation", "control")
_YEAR = re.compile(r"\b(1[6-9]\d\d|20[0-2]\d)\b")
_NUM = re.compile(r"(?<![\d.,])(\d{2,4})(?![\d.,])")
_NAME = re.compile(r"(?<=[a-z,;] )([A-Z][a-z]{2,})\b")
_AUX = re.compile(r"\b(is|was|are|were|has|had|can|will|did)\b")
# "not only", "not least": no negation to remove (the judge reads them so too).
_NEG = re.compile(r"\s+not\b(?!\s+(?:only|just|merely|simply|least|no)\b)|n't\b")
UNIT_SWAPS = {"km": "miles", "kilometres": "miles", "kilometers": "miles", "miles": "kilometres", "metres": "feet",
              "meters": "feet", "feet": "metres", "%": " points", "percent": "points", "kg": "pounds",
              "pounds": "kilograms", "years": "months", "months": "years", "days": "weeks", "weeks": "days",
              "hours": "minutes", "minutes": "hours", "million": "billion", "billion": "million",
              "dollars": "euros", "euros": "dollars"}
_UNIT = re.compile(r"\b(\d[\d,.]*)\s?(" + "|".join(sorted(map(re.escape, UNIT_SWAPS), key=len, reverse=True)) + r")\b")


@dataclass
class Planted:
    kind: str
    claim: str
    passages: list[str]
    doc: str


def _passages(text: str) -> tuple[list[str], list[str]]:
    sents = [text[s:e] for s, e in sentence_spans(text)]
    chunks = [" ".join(sents[i:i + PASSAGE_SENTENCES]) for i in range(0, len(sents), PASSAGE_SENTENCES)]
    return sents, chunks


def _change(kind: str, s: str, names: list[str], rng: random.Random) -> str | None:
    if kind == "control":
        return s
    if kind == "name":
        found = [m for m in _NAME.finditer(s)]
        if not found:
            return None
        m = rng.choice(found)
        others = [n for n in names if n != m.group(1) and n not in s]
        return s[:m.start(1)] + rng.choice(others) + s[m.end(1):] if others else None
    if kind == "date":
        found = list(_YEAR.finditer(s))
        if not found:
            return None
        m = rng.choice(found)
        return s[:m.start()] + str(int(m.group()) + rng.choice([-1, 1]) * rng.randint(1, 9)) + s[m.end():]
    if kind == "number":
        found = [m for m in _NUM.finditer(s) if not _YEAR.fullmatch(m.group(1))]
        if not found:
            return None
        m = rng.choice(found)
        v = int(m.group(1))
        return s[:m.start(1)] + str(round(v * rng.uniform(1.5, 3.0))) + s[m.end(1):]
    if kind == "unit":
        found = list(_UNIT.finditer(s))
        if not found:
            return None
        m = rng.choice(found)
        return s[:m.start(2)] + UNIT_SWAPS[m.group(2)].strip() + s[m.end(2):]
    if kind == "negation":
        m = _NEG.search(s)
        if m:
            return s[:m.start()] + s[m.end():]
        m = _AUX.search(s)
        if not m or re.match(r"\s+(?:no|never|nothing|none)\b", s[m.end():]):
            return None  # "is not no secret": a double negation, not a flip
        return s[:m.end()] + " not" + s[m.end():]
    raise ValueError(kind)


def build(per_kind: int = 120, seed: int = 13) -> list[Planted]:
    """Up to `per_kind` claims of each kind, from distinct long WiCE pages in turn."""
    docs = sorted({c.passages[0] for c in lodo_sets.load("wice", limit=10**6) if len(c.passages[0]) >= MIN_DOC})
    rng = random.Random(seed)
    rng.shuffle(docs)
    out: list[Planted] = []
    counts = dict.fromkeys(KINDS, 0)
    for doc in docs:
        sents, chunks = _passages(doc)
        names = sorted({m.group(1) for m in _NAME.finditer(doc)})
        cand = [s.strip() for s in sents if 8 <= len(s.split()) <= 60]
        rng.shuffle(cand)
        for kind in KINDS:
            taken = 0
            for s in cand:
                if counts[kind] >= per_kind or taken >= 2:
                    break
                changed = _change(kind, s, names, rng)
                if changed is None or (kind != "control" and changed == s):
                    continue
                out.append(Planted(kind, changed, chunks, doc[:40]))
                counts[kind] += 1
                taken += 1
    return out
