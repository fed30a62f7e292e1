"""diagnose: every claim gets exactly one label of the closed taxonomy (docs/design.md §2).

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

Answer spans (tasks/core/answer_spans.py): for every claim that is not `correct` (an
uncertain `correct` claim has none: its flag says it), the marks of the passage its label rests on — the deciding
evidence, or for a hallucination the closest passage about it — placed in the answer; a
hallucination nothing is about is unsupported whole.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
from ragspan.tasks.core import schemas
from ragspan.tasks.core.answer_spans import answer_spans_of_claim, parse_marks, whole_claim
from ragspan.tasks.steps.cache_policy import step_task

# (label, does this judgement belong to the tier?) in decision order.
_TIERS = (
    ("correct", lambda j: j["source"] == "retrieved" and j["in_context"]),
    ("rank_failure", lambda j: j["source"] == "retrieved" and not j["in_context"]),
    ("retrieval_miss", lambda j: j["source"] == "corpus"),
)
_NO_EVIDENCE = {"doc_id": None, "chunk_id": None, "char_start": None, "char_end": None, "span_text": None,
                "rank": None, "in_context": None, "score": None, "source_conflict": False,
                "evidence_source": None, "match": None, "confidence": None, "decided_by": None}
_NO_RANK = 10**9


def _best(rows: list[dict]) -> dict:
    """The deciding evidence: highest confidence, then best rank, then earliest span."""
    return min(rows, key=lambda j: (-j["confidence"], _NO_RANK if j["rank"] is None else j["rank"],
                                    j["chunk_id"], j["char_start"]))


def _supports(j: dict, support_threshold: float) -> bool:
    return j["match"] is not None and j["verdict"] == "supported" and j["confidence"] >= support_threshold


def diagnosis_for_claim(claim: dict, judged: list[dict], support_threshold: float) -> dict:
    """The label of one claim from its judgements (records of the Judgements table)."""
    base = {k: claim[k] for k in ("run", "question_id", "claim_id", "claim", "answer_start", "answer_end")}
    if claim["decompose_error"] is not None:
        return {**base, **_NO_EVIDENCE, "label": "unjudged",
                "reason": f"decomposition failed: {claim['decompose_error']}"}
    evidence = [j for j in judged if j["source"] != "reference"]
    for label, in_tier in _TIERS:
        tier = [j for j in evidence if in_tier(j)]
        support = [j for j in tier if _supports(j, support_threshold)]
        if support:
            return {**base, **_evidence(_best(support)), "label": label,
                    "reason": _reason(label, _best(support), support_threshold), **_marks_of(_best(support))}
        failed = [j for j in tier if j["error"] is not None]
        if failed:
            kinds = ", ".join(sorted({j["error"] for j in failed}))
            return {**base, **_NO_EVIDENCE, "label": "unjudged",
                    "reason": f"judge failed ({kinds}) on {len(failed)} passage(s)"}
    about = [j for j in evidence if j["source"] == "retrieved" and j["in_context"] and j["match"] is not None
             and j["verdict"] in ("partial", "supported")]
    if about:
        return {**base, **_evidence(_best(about)), "label": "synthesis_error",
                "reason": _reason("synthesis_error", _best(about), support_threshold), **_marks_of(_best(about))}
    related = _related(evidence)
    return {**base, **_NO_EVIDENCE, "label": "hallucination",
            "reason": _hallucination_reason(evidence, support_threshold),
            **(_marks_of(_best(related)) if related else {})}


def _marks_of(row: dict) -> dict:
    """What the answer spans of a claim come from (not diagnoses columns: schemas.table
    keeps only those)."""
    return {"marks": row.get("marks"), "marks_doc": row["doc_id"], "marks_from": True}


def _related(evidence: list[dict]) -> list[dict]:
    """Passages about the claim (partial, or supported below the threshold) anywhere."""
    return [j for j in evidence if j["match"] is not None and j["verdict"] in ("partial", "supported")]


def _evidence(row: dict) -> dict:
    return {
        "doc_id": row["doc_id"], "chunk_id": row["chunk_id"], "char_start": row["char_start"],
        "char_end": row["char_end"], "span_text": row["span_text"], "rank": row["rank"],
        "in_context": bool(row["in_context"]), "score": row["score"], "source_conflict": False,
        "evidence_source": row["source"], "match": row["match"], "confidence": row["confidence"],
        "decided_by": row["decided_by"],
    }


def _reason(label: str, top: dict, threshold: float) -> str:
    where = {
        "correct": f"supported by in-context chunk at rank {top['rank']}",
        "rank_failure": f"supported by chunk retrieved at rank {top['rank']}, below the context cutoff",
        "retrieval_miss": "supported by a chunk the retriever never returned (found by corpus-wide search)",
        "synthesis_error": f"in-context chunk at rank {top['rank']} is about the claim but does not support it"
                           + _below(top, threshold),
    }[label]
    return f"{where}; judge: {top['reason']}" if top["reason"] else where


def _below(j: dict, threshold: float) -> str:
    """Why a passage judged `supported` still does not count: its probability is under
    the threshold (said with both numbers, so the reason agrees with the score shown)."""
    if j["verdict"] == "supported":
        return f" (judged supported with probability {j['confidence']:.2f}, below support_threshold {threshold:.2f})"
    return f" (judged partial, confidence {j['confidence']:.2f})"


def _hallucination_reason(evidence: list[dict], threshold: float) -> str:
    """No support anywhere and nothing in context about the claim. Passages that are about
    it elsewhere (below the cutoff, corpus-wide) or supported below the threshold are named,
    so the reason agrees with the evidence listed beside it."""
    related = _related(evidence)
    if not related:
        return "no passage in context, retrieved or corpus-wide supports or is about the claim"
    top = _best(related)
    where = ("a passage found by corpus-wide search (never retrieved)" if top["source"] == "corpus" else
             f"the in-context chunk at rank {top['rank']}" if top["in_context"] else
             f"the chunk retrieved at rank {top['rank']}, below the context cutoff")
    return (f"no passage supports the claim at support_threshold {threshold:.2f}, and none in context is "
            f"about it; the closest is {where}{_below(top, threshold)}")


def _records(table: pd.DataFrame) -> list[dict]:
    """Rows as dicts with missing values as None (pandas gives NaN/NA otherwise)."""
    return schemas.records(table, missing_as_none=True)


def tier_support(judged: Iterable[pd.DataFrame]) -> dict[str, list[float | None]]:
    """Per claim, the highest probability of support in each tier (in context, below the
    cutoff, corpus-wide): what its label rests on. None where a tier has no probability."""
    frames = [t[["claim_id", "source", "in_context", "support"]] for t in judged if len(t)]
    if not frames:
        return {}
    j = pd.concat(frames, ignore_index=True)
    j = j[j["support"].notna() & (j["source"] != "reference")]
    tier = (j["source"] == "corpus").astype(int) * 2 + ((j["source"] == "retrieved") & ~j["in_context"].astype(bool))
    best = j.assign(tier=tier.to_numpy()).groupby(["claim_id", "tier"])["support"].max()
    out: dict[str, list[float | None]] = {}
    for (cid, t), p in best.items():
        out.setdefault(cid, [None, None, None])[int(t)] = float(p)
    return out


# How many tiers a label examined before it was decided (correct: only the context).
_TIERS_EXAMINED = {"correct": 1, "rank_failure": 2, "retrieval_miss": 3, "synthesis_error": 3, "hallucination": 3}


def support_and_uncertainty(label: str, tiers: list[float | None] | None, threshold: float,
                            band: float) -> tuple[float | None, bool]:
    """(the claim's probability of support, is its label uncertain). Uncertain when a
    tier the label rests on has its best probability within `band` of the threshold:
    a small change in the judge would move the claim to another label."""
    if not tiers or label == "unjudged":
        return (max((p for p in (tiers or []) if p is not None), default=None), False)
    examined = [p for p in tiers[:_TIERS_EXAMINED.get(label, 3)] if p is not None]
    probability = max((p for p in tiers if p is not None), default=None)
    return probability, any(abs(p - threshold) <= band for p in examined)


def judges_that_decided(judged: Iterable[pd.DataFrame]) -> tuple[set[str], str | None]:
    """(claims an LLM judged, the judge of every other claim): a cascade hands some claims
    to the LLM, whose verdicts then decide even a label with no evidence (hallucination)."""
    frames = [t[["claim_id", "decided_by"]] for t in judged if len(t)]
    if not frames:
        return set(), None
    j = pd.concat(frames, ignore_index=True)
    by_llm = set(j.loc[j["decided_by"] == "openai", "claim_id"])
    kinds = set(j["decided_by"].dropna())
    return by_llm, min(kinds - {"openai"}) if kinds - {"openai"} else (next(iter(kinds), None))


def diagnose_claims(claims: pd.DataFrame, judged: Iterable[pd.DataFrame], support_threshold: float,
                    uncertainty_band: float = 0.0,
                    answers: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(Diagnoses, AnswerSpans). `answers` (question_id, answer) places the answer spans;
    without them there are none."""
    judged = list(judged)
    tiers = tier_support(judged)
    by_llm, other_judge = judges_that_decided(judged)
    closest = closest_marks(judged)
    per_claim: dict[str, list[dict]] = {}
    for table in judged:
        # Only rows that can decide something: a supported/partial verdict or a judge
        # error (an `unsupported` verdict never supports, is never "about" the claim and
        # never fails; at scale it is most rows).
        table = table[table["verdict"].isin(("supported", "partial")) | table["error"].notna()]
        for j in _records(table):
            per_claim.setdefault(j["claim_id"], []).append(j)
    rows: list[dict] = []
    marked: list[dict] = []
    texts = None if answers is None else dict(zip(answers["question_id"], answers["answer"]))
    for c in _records(claims):
        mine = per_claim.get(c["claim_id"], [])
        d = diagnosis_for_claim(c, mine, support_threshold)
        # source_conflict: the reference answer is about the claim but disagrees with it.
        if d["label"] == "correct" and any(j["source"] == "reference" and j["verdict"] == "partial" for j in mine):
            d["source_conflict"] = True
            d["reason"] += "; the reference answer contradicts it (source_conflict)"
        if d["decided_by"] is None and (mine or d["label"] == "hallucination"):
            d["decided_by"] = "openai" if c["claim_id"] in by_llm else other_judge
        d["support_probability"], d["uncertain"] = support_and_uncertainty(
            d["label"], tiers.get(c["claim_id"]), support_threshold, uncertainty_band)
        if d["label"] == "hallucination" and not d.get("marks_from") and c["claim_id"] in closest:
            d.update(closest[c["claim_id"]])
        if texts is not None:
            marked += counted_answer_spans(c, d, texts)
        d["chunk_split"], d["split_at"] = False, None  # set by the boundary step (tasks/steps/boundary.py)
        rows.append(d)
    return schemas.table(rows, schemas.Diagnoses), schemas.table(marked, schemas.AnswerSpans, written=False)


def closest_marks(judged: Iterable[pd.DataFrame]) -> dict[str, dict]:
    """Per claim, the marks of its most probable `unsupported` passage that has any (one the
    judge aligned with the claim, but not enough to call it about the claim): what a
    hallucination no passage is about is marked from — the words that passage does hold are
    not the invented ones."""
    frames = [t.loc[(t["verdict"] == "unsupported") & t["marks"].notna(), ["claim_id", "support", "doc_id", "marks"]]
              for t in judged if len(t)]
    frames = [f for f in frames if len(f)]
    if not frames:
        return {}
    rows = pd.concat(frames, ignore_index=True).sort_values(["claim_id", "support"], ascending=[True, False],
                                                           kind="stable").drop_duplicates("claim_id")
    return {cid: {"marks": m, "marks_doc": doc, "marks_from": True}
            for cid, doc, m in zip(rows["claim_id"], rows["doc_id"], rows["marks"])}


def counted_answer_spans(claim: dict, d: dict, answers: dict[str, str]) -> list[dict]:
    """The claim's AnswerSpans rows; sets `unsupported_chars` / `unsupported_share` on `d`
    when it has answer spans to give (see answer_spans_for)."""
    spans = answer_spans_for(claim, d, answers)
    if spans is None:
        return []
    located = d["answer_end"] - d["answer_start"]
    d["unsupported_chars"] = sum(x["answer_end"] - x["answer_start"] for x in spans)
    d["unsupported_share"] = round(d["unsupported_chars"] / located, 6) if located else 0.0
    return [{"run": claim["run"], "question_id": claim["question_id"], "claim_id": claim["claim_id"], **x}
            for x in spans]


def answer_spans_for(claim: dict, d: dict, answers: dict[str, str]) -> list[dict] | None:
    """The claim's answer spans; None when it has none to give (unjudged, or not located
    in its answer), [] when nothing of it is unmarked or it was not examined (a certain
    `correct` claim)."""
    a0, a1 = claim["answer_start"], claim["answer_end"]
    answer = answers.get(claim["question_id"])
    if d["label"] == "unjudged" or a0 is None or a1 is None or answer is None:
        return None
    if d["label"] == "correct":
        # correct, certain or not: nothing of it is unsupported (an uncertain one is
        # flagged `uncertain` on its diagnosis and sent on by the cascade; issue 41)
        return []
    if not d.get("marks_from"):  # a hallucination nothing in the corpus is about
        return whole_claim(answer, a0, a1)
    marks = parse_marks(d.get("marks"))
    if not marks and d["label"] in ("synthesis_error", "hallucination"):
        # a failed claim whose judge did not say which words fail: all of it is marked,
        # never none (an empty mark would read as "nothing wrong here")
        return whole_claim(answer, a0, a1)
    return answer_spans_of_claim(answer, claim["claim"], a0, a1, marks, d.get("marks_doc"))


@step_task("diagnose")
def diagnose(claims: pd.DataFrame, judged: pd.DataFrame, searched: pd.DataFrame, answers: pd.DataFrame,
             support_threshold: float, uncertainty_band: float, code: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(Diagnoses, AnswerSpans) of a shard's claims."""
    return diagnose_claims(claims, [judged, searched], support_threshold, uncertainty_band,
                           answers[["question_id", "answer"]])
