"""diagnose: every claim gets exactly one label of the closed taxonomy (DESIGN §2).

    claim
    ├── the answer could not be decomposed ............................ unjudged
    ├── an in-context chunk supports it ................................ correct
    │       └── (reference answer about it but disagrees) ... + source_conflict
    ├── (a judge failure on an in-context chunk) ....................... unjudged
    ├── a retrieved chunk below the cutoff supports it ............ rank_failure
    ├── (a judge failure on a below-cutoff chunk) ...................... unjudged
    ├── a never-retrieved chunk found corpus-wide supports it .... retrieval_miss
    ├── (a judge failure on a corpus-wide hit) ......................... unjudged
    ├── an in-context chunk is about it (partial) .............. synthesis_error
    └── nothing ................................................. hallucination

"Supports" = verdict `supported` with confidence ≥ judge.support_threshold and a
validated span; "about it" = `partial`, or `supported` below the threshold. A judge
failure only decides a claim when no earlier branch already has — a failed call can
never hide behind, or be turned into, another label.
"""

from __future__ import annotations

from typing import Iterable

import pandas as pd

from ragspan.tasks import schemas
from ragspan.tasks.orchestration import step_task

_TIERS = (
    ("correct", lambda j: (j["source"] == "retrieved") & j["in_context"]),
    ("rank_failure", lambda j: (j["source"] == "retrieved") & ~j["in_context"]),
    ("retrieval_miss", lambda j: j["source"] == "corpus"),
)


def _best(rows: pd.DataFrame) -> dict:
    """The deciding evidence: highest confidence, then best rank, then earliest span."""
    ordered = rows.assign(_r=rows["rank"].fillna(10**9)).sort_values(
        ["confidence", "_r", "chunk_id", "char_start"], ascending=[False, True, True, True], kind="stable"
    )
    return ordered.iloc[0].to_dict()


def diagnosis_for_claim(claim: dict, judged: pd.DataFrame, support_threshold: float) -> dict:
    base = {k: claim[k] for k in ("run", "question_id", "claim_id", "claim", "answer_start", "answer_end")}
    empty = dict(doc_id=None, chunk_id=None, char_start=None, char_end=None, span_text=None, rank=None,
                 in_context=None, score=None, source_conflict=False, evidence_source=None, match=None,
                 confidence=None)
    if isinstance(claim["decompose_error"], str):
        return {**base, **empty, "label": "unjudged", "reason": f"decomposition failed: {claim['decompose_error']}"}
    evidence = judged[judged["source"] != "reference"]
    spanned = evidence["match"].notna()
    supports = spanned & (evidence["verdict"] == "supported") & (evidence["confidence"] >= support_threshold)
    for label, tier_of in _TIERS:
        tier = tier_of(evidence)
        if (tier & supports).any():
            return {**base, **_evidence(_best(evidence[tier & supports])), "label": label,
                    "reason": _reason(label, evidence[tier & supports])}
        failed = evidence[tier & evidence["error"].notna()]
        if not failed.empty:
            kinds = ", ".join(sorted(set(failed["error"])))
            return {**base, **empty, "label": "unjudged", "reason": f"judge failed ({kinds}) on {len(failed)} passage(s)"}
    in_context = (evidence["source"] == "retrieved") & evidence["in_context"]
    about = spanned & in_context & ((evidence["verdict"] == "partial") | (evidence["verdict"] == "supported"))
    if about.any():
        return {**base, **_evidence(_best(evidence[about])), "label": "synthesis_error",
                "reason": _reason("synthesis_error", evidence[about])}
    return {**base, **empty, "label": "hallucination",
            "reason": "no passage in context, retrieved or corpus-wide supports or is about the claim"}


def _evidence(row: dict) -> dict:
    return {
        "doc_id": row["doc_id"], "chunk_id": row["chunk_id"], "char_start": row["char_start"],
        "char_end": row["char_end"], "span_text": row["span_text"], "rank": row["rank"],
        "in_context": bool(row["in_context"]), "score": row["score"], "source_conflict": False,
        "evidence_source": row["source"], "match": row["match"], "confidence": row["confidence"],
    }


def _reason(label: str, rows: pd.DataFrame) -> str:
    top = _best(rows)
    where = {
        "correct": f"supported by in-context chunk at rank {top['rank']}",
        "rank_failure": f"supported by chunk retrieved at rank {top['rank']}, below the context cutoff",
        "retrieval_miss": "supported by a chunk the retriever never returned (found by corpus-wide search)",
        "synthesis_error": f"in-context chunk at rank {top['rank']} is about the claim but does not support it",
    }[label]
    return f"{where}; judge: {top['reason']}" if isinstance(top["reason"], str) and top["reason"] else where


def source_conflicts(judged: pd.DataFrame) -> set[str]:
    """Claims the question's reference answer is about but disagrees with."""
    ref = judged[(judged["source"] == "reference") & (judged["verdict"] == "partial")]
    return set(ref["claim_id"])


def diagnoses_for_claims(claims: pd.DataFrame, judged: Iterable[pd.DataFrame], support_threshold: float) -> pd.DataFrame:
    all_judged = pd.concat([j for j in judged if not j.empty] or [schemas.table([], schemas.Judgements)], ignore_index=True)
    per_claim = dict(tuple(all_judged.groupby("claim_id", sort=False)))
    empty = all_judged.iloc[0:0]
    conflicts = source_conflicts(all_judged)
    rows = []
    for c in claims.to_dict("records"):
        d = diagnosis_for_claim(c, per_claim.get(c["claim_id"], empty), support_threshold)
        if d["label"] == "correct" and c["claim_id"] in conflicts:
            d["source_conflict"] = True
            d["reason"] += "; the reference answer contradicts it (source_conflict)"
        rows.append(d)
    return schemas.table(rows, schemas.Diagnoses)


@step_task("diagnose")
def diagnose(claims: pd.DataFrame, judged: pd.DataFrame, searched: pd.DataFrame,
             support_threshold: float, code: str) -> pd.DataFrame:
    return diagnoses_for_claims(claims, [judged, searched], support_threshold)
