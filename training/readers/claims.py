"""Loaders for the real, human-labelled claim sets: WiCE (dev) and Factcheck-GPT (stance).

Like training/readers/qa.py, the data is read-only from `RAGSPAN_BENCH_DATA` (default
`<repo>/../shared/data`) and is never copied into the repository: a benchmark builds its
workspace from these cases in a temporary directory at run time.

Both sets are claims checked by people against given passages, with no question; gold is
one of `supported` | `partial` | `unsupported`, which ragspan should call `correct` |
`synthesis_error` | `hallucination` when every passage sits in the context window.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("RAGSPAN_BENCH_DATA", REPO.parent / "shared" / "data"))
WICE = DATA / "wice_dev" / "claim_dev.jsonl"
FACTCHECK = DATA / "factcheck_stance" / "subtask3_claim_evidence_stance.jsonl"

GOLDS = ("supported", "partial", "unsupported")
WICE_GOLD = {
    "supported": "supported",
    "partially_supported": "partial",
    "not_supported": "unsupported",
}
# Pair level: a refuting snippet is about the claim but does not support it, which is what
# ragspan calls a synthesis error (`partial`), not a hallucination.
STANCE_GOLD = {
    "completely-support": "supported",
    "partially-support": "partial",
    "refute": "partial",
    "irrelevant": "unsupported",
}


@dataclass
class Case:
    """One claim to judge against its passages, all of which sit in the context window."""

    set: str  # wice | factcheck
    case_id: str
    group: str  # the claim id: cross-validation never splits one claim across folds
    question: str  # "" for both sets: they have no question
    claim: str
    passages: list[str]
    gold: str  # supported | partial | unsupported
    # WiCE: character spans, in passages[0], of every sentence of any supporting set.
    gold_spans: list[tuple[int, int]] = field(default_factory=list)
    level: str = "claim"  # claim | pair (Factcheck-GPT: one claim x one snippet)


def _read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# ---------------------------------------------------------------- WiCE


def wice_document(sentences: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """The cited page as one text (sentences joined with "\\n") and each sentence's span,
    so the gold sentence indices become character spans in the text ragspan sees."""
    spans, pos = [], 0
    for s in sentences:
        spans.append((pos, pos + len(s)))
        pos += len(s) + 1
    return "\n".join(sentences), spans


def load_wice(path: Path = WICE) -> list[Case]:
    """WiCE dev: one case per claim, its whole cited page the only passage."""
    cases = []
    for r in _read_jsonl(path):
        text, spans = wice_document(r["evidence"])
        indices = sorted({i for group in r["supporting_sentences"] for i in group})
        if any(i >= len(spans) for i in indices):
            raise ValueError(f"{path}: {r['meta']['id']}: supporting sentence index out of range")
        claim_id = r["meta"]["id"]
        cases.append(
            Case(
                set="wice",
                case_id=f"wice:{claim_id}",
                group=claim_id,
                question="",
                claim=r["claim"],
                passages=[text],
                gold=WICE_GOLD[r["label"]],
                gold_spans=[spans[i] for i in indices if spans[i][1] > spans[i][0]],
            )
        )
    return cases


# ---------------------------------------------------------------- Factcheck-GPT


def _factcheck_claims(path: Path) -> list[tuple[str, str, list[dict]]]:
    """(claim id, claim, its rows in file order), claims numbered by first appearance:
    the set has no ids, and the claim text is what identifies a claim."""
    rows: dict[str, list[dict]] = defaultdict(list)
    for r in _read_jsonl(path):
        rows[r["claim"]].append(r)
    return [(f"fc{i:04d}", claim, rs) for i, (claim, rs) in enumerate(rows.items())]


def aggregate_stances(stances: list[str]) -> str:
    """The gold of a claim (or of a repeated pair) from its passages' stances: supported if
    any passage completely supports it, else partial if any is about it (partial support or
    refutation), else unsupported."""
    golds = {STANCE_GOLD[s] for s in stances}
    return next(g for g in GOLDS if g in golds)


def _distinct_snippets(rows: list[dict]) -> dict[str, list[str]]:
    """Snippet text -> its stances, in file order: some claims list the same snippet twice
    (207 rows), and judging one passage twice adds nothing."""
    out: dict[str, list[str]] = {}
    for r in rows:
        out.setdefault(r["evidence"], []).append(r["stance"])
    return out


def load_factcheck(path: Path = FACTCHECK) -> list[Case]:
    """Factcheck-GPT claim level: one case per claim, its distinct snippets the passages."""
    cases = []
    for claim_id, claim, rows in _factcheck_claims(path):
        snippets = _distinct_snippets(rows)
        cases.append(
            Case(
                set="factcheck",
                case_id=f"factcheck:{claim_id}",
                group=claim_id,
                question="",
                claim=claim,
                passages=list(snippets),
                gold=aggregate_stances([r["stance"] for r in rows]),
            )
        )
    return cases
