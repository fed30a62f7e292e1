"""boundary: evidence cut by a chunk boundary (issue 30) — two thin steps around a judge
pass, the rule itself in tasks/core/chunk_split.py.

    diagnose → chunk-windows → extract → validate_offsets → chunk-split

`chunk-windows` joins, for the claims the rule looks at again, each passage with its
neighbouring chunks into one window (a Passages table: the judges read it like any
passage, so the LLM judge gets it as one passage and its quote is validated against it
and mapped to document offsets as always). `chunk-split` sets `chunk_split` / `split_at`
on the claims whose window evidence crosses the chunk's edge and is held whole by no
chunk, with the label the rule gives, its evidence and its answer spans.
"""

from __future__ import annotations

from functools import lru_cache

import pandas as pd
from ragspan.tasks.core import schemas
from ragspan.tasks.core.among import among
from ragspan.tasks.core.chunk_split import (
    RECHECK_FAILED,
    SUPPORTING,
    Chunk,
    cut_at,
    label_of_split,
    near_edges,
    passages_to_recheck,
    window,
)
from ragspan.tasks.steps.cache_policy import step_task
from ragspan.tasks.steps.corpus_search import index_chunks, index_rows
from ragspan.tasks.steps.diagnose import counted_answer_spans
from ragspan.tasks.steps.index_layout import IndexLayout


@lru_cache(maxsize=2)
def _layout(index_dir: str) -> IndexLayout:
    """The index's chunks ordered by document and start, as arrays (tasks/steps/index_layout.py)."""
    return IndexLayout(index_chunks(index_dir))


def _chunk_texts(passages: pd.DataFrame, chunk_ids: set[str]) -> dict[str, tuple[Chunk, str]]:
    """chunk_id → (place, text) of these document passages judged (retrieved or corpus hits)."""
    p = passages[(passages["source"] != "reference") & among(passages["chunk_id"], chunk_ids)]
    columns = (p[c].tolist() for c in ("chunk_id", "doc_id", "passage_start", "passage_text"))  # not Arrow iteration
    return {cid: (Chunk(cid, doc, int(start), int(start) + len(text)), text) for cid, doc, start, text in zip(*columns)}


def _candidates(diagnoses: pd.DataFrame, judgements: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Only what passages_to_recheck can use, column-wise (a shard holds ~10 judgements per
    claim): the failed claims' judgements, and the supported claims' deciding ones."""
    failed = diagnoses["label"].isin(RECHECK_FAILED)
    supported = diagnoses[diagnoses["label"].isin(SUPPORTING) & diagnoses["chunk_id"].notna()]
    j = judgements[judgements["error"].isna() & judgements["source"].isin(("retrieved", "corpus"))]
    deciding = pd.MultiIndex.from_arrays([supported["claim_id"], supported["chunk_id"]])
    mine = among(j["claim_id"], set(diagnoses.loc[failed, "claim_id"])).to_numpy() | pd.MultiIndex.from_arrays(
        [j["claim_id"], j["chunk_id"]]).isin(deciding)
    return diagnoses[failed | among(diagnoses["claim_id"], supported["claim_id"])], j[mine]


def window_passages(diagnoses: pd.DataFrame, judgements: pd.DataFrame, passages: pd.DataFrame,
                    index_dir: str) -> pd.DataFrame:
    """The windows to judge, as a Passages table (one row per claim and passage joined)."""
    diagnoses, judgements = _candidates(diagnoses, judgements)
    known = _chunk_texts(passages, set(judgements["chunk_id"]))
    # only the columns the rule reads: a judgement's quote, reason and marks are long strings
    seen = passages_to_recheck(
        schemas.records(diagnoses[["claim_id", "question_id", "claim", "label", "chunk_id", "char_start",
                                   "char_end"]], missing_as_none=True),
        schemas.records(judgements[["claim_id", "source", "error", "chunk_id", "support", "confidence", "rank",
                                    "in_context", "score"]], missing_as_none=True), known)
    layout = _layout(index_dir)
    neighbours = {n.chunk_id for s in seen for n in (layout.before(s.chunk.doc_id, s.chunk.start, s.chunk.end),
                                                      layout.after(s.chunk.doc_id, s.chunk.start, s.chunk.end))
                  if n is not None}
    table = index_rows(index_dir, [layout.row_of(c) for c in sorted(neighbours)],
                       ["chunk_id", "text", "gap_before", "gap_after"])
    text_of = dict(zip(table.column("chunk_id").to_pylist(),
                       zip(*(table.column(c).to_pylist() for c in ("text", "gap_before", "gap_after")))))
    out = []
    for s in seen:
        s = near_edges(s, layout, text_of, known[s.chunk.chunk_id][1])  # no judge call where no cut can be
        joined = window(s, layout, text_of, known[s.chunk.chunk_id][1]) if s.sides else None
        if joined is not None:
            out.append({"question_id": s.question_id, "claim_id": s.claim_id, "source": s.source,
                        "chunk_id": s.chunk.chunk_id, "doc_id": s.chunk.doc_id, "passage_start": joined[0],
                        "rank": s.rank, "in_context": s.in_context, "score": s.score, "passage_text": joined[1]})
    return schemas.table(out, schemas.Passages)


def mark_splits(diagnosed: tuple[pd.DataFrame, pd.DataFrame], across: pd.DataFrame, passages: pd.DataFrame,
                answers: pd.DataFrame, index_dir: str, support_threshold: float,
                uncertainty_band: float) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(Diagnoses, AnswerSpans, the window judgements to keep: those that decided a split,
    and judge failures, so an answer hit by an outage is tried again)."""
    diagnoses, answer_spans = diagnosed
    known = _chunk_texts(passages, set(across["chunk_id"]))
    layout = _layout(index_dir)
    windows = schemas.records(across, missing_as_none=True)
    claims = dict(zip(diagnoses["claim_id"], diagnoses["claim"]))
    found: dict[str, tuple[dict, int]] = {}
    # the most confident window decides; on a tie the one the question saw best (in context, rank)
    for j in sorted(windows, key=lambda j: (-(j["confidence"] or 0.0), j["source"] != "retrieved",
                                            not j["in_context"], j["rank"] or 10**9, j["chunk_id"])):
        if (j["claim_id"] in found or j["verdict"] != "supported" or j["match"] is None
                or j["confidence"] < support_threshold or j["chunk_id"] not in known):
            continue
        edge = cut_at(claims[j["claim_id"]], (j["char_start"], j["char_end"], j["span_text"]),
                      known[j["chunk_id"]][0], layout)
        if edge is not None:
            found[j["claim_id"]] = (j, edge)
    errors = across[across["error"].notna()]
    if not found:  # the usual case: nothing cut, the tables pass through
        return diagnoses, answer_spans, errors.reset_index(drop=True)
    questions = set(diagnoses.loc[among(diagnoses["claim_id"], found), "question_id"])
    retrieved = _retrieved_by_question(passages[among(passages["question_id"], questions)])
    texts = dict(zip(answers["question_id"], answers["answer"]))
    rows, marked = [], []
    for d in schemas.records(diagnoses, missing_as_none=True):
        if d["claim_id"] in found:
            j, edge = found[d["claim_id"]]
            d = _split_diagnosis(d, j, edge, retrieved.get((d["question_id"], j["doc_id"]), []),
                                 support_threshold, uncertainty_band)
            marked += counted_answer_spans(d, d, texts)  # the window's marks: what its evidence leaves out
        rows.append(d)
    kept_spans = answer_spans[~among(answer_spans["claim_id"], found)]
    answer_spans = pd.concat([kept_spans, schemas.table(marked, schemas.AnswerSpans, written=False)],
                             ignore_index=True) if marked else kept_spans.reset_index(drop=True)
    deciding = pd.MultiIndex.from_tuples([(j["claim_id"], j["chunk_id"]) for j, _ in found.values()])
    keep = across["error"].notna() | pd.MultiIndex.from_arrays([across["claim_id"], across["chunk_id"]]).isin(
        deciding)
    return (schemas.table(rows, schemas.Diagnoses, written=False), answer_spans,
            across[keep].reset_index(drop=True))


def _retrieved_by_question(passages: pd.DataFrame) -> dict[tuple[str, str], list[tuple[int, int, bool]]]:
    """(question, document) → (start, end, in context) of its retrieved passages."""
    r = passages[passages["source"] == "retrieved"]
    out: dict[tuple[str, str], list[tuple[int, int, bool]]] = {}
    for q, doc, start, text, ctx in zip(r["question_id"], r["doc_id"], r["passage_start"], r["passage_text"],
                                        r["in_context"]):
        out.setdefault((q, doc), []).append((int(start), int(start) + len(text), bool(ctx)))
    return out


def _split_diagnosis(d: dict, j: dict, edge: int, retrieved: list[tuple[int, int, bool]], threshold: float,
                     band: float) -> dict:
    """A claim's diagnosis with its evidence cut at `edge`: the window's span, the rule's label."""
    label = label_of_split(d["label"], [(j["char_start"], edge), (edge, j["char_end"])], retrieved)
    was = "" if label == d["label"] else f" (read in halves: {d['label']})"
    where = f"the chunk at rank {j['rank']}" if j["rank"] is not None else "a chunk found by corpus-wide search"
    p = j["support"] if j["support"] is not None else j["confidence"]
    probability = max(p, d["support_probability"] or 0.0)
    uncertain = abs(p - threshold) <= band if label != d["label"] else d["uncertain"]
    return {**d, "label": label, "doc_id": j["doc_id"], "chunk_id": j["chunk_id"], "char_start": j["char_start"],
            "char_end": j["char_end"], "span_text": j["span_text"], "rank": j["rank"],
            "in_context": bool(j["in_context"]), "score": j["score"], "evidence_source": j["source"],
            "match": j["match"], "confidence": j["confidence"], "decided_by": j["decided_by"],
            "support_probability": probability, "uncertain": uncertain, "chunk_split": True, "split_at": edge,
            "marks": j["marks"], "marks_doc": j["doc_id"], "marks_from": True,
            "reason": f"evidence cut by the chunk boundary at {edge}: {where} holds only part of it, "
                      f"joined with its neighbour it supports the claim{was}"}


@step_task("chunk-windows")
def chunk_windows(diagnoses: pd.DataFrame, judged: pd.DataFrame, searched: pd.DataFrame,
                  passages: pd.DataFrame, hits: pd.DataFrame, index_dir: str, code: str) -> pd.DataFrame:
    """Passages table: the windows across chunk edges to judge (see window_passages). Every
    input a table or a scalar: the step's cache key hashes tables by value (cache_policy.py)."""
    return window_passages(diagnoses, pd.concat([judged, searched], ignore_index=True),
                           pd.concat([passages, hits], ignore_index=True), index_dir)


@step_task("chunk-split")
def chunk_split(diagnoses: pd.DataFrame, answer_spans: pd.DataFrame, across: pd.DataFrame, passages: pd.DataFrame,
                hits: pd.DataFrame, answers: pd.DataFrame, index_dir: str, support_threshold: float,
                uncertainty_band: float, code: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(Diagnoses, AnswerSpans, window judgements kept) with chunk_split / split_at set."""
    return mark_splits((diagnoses, answer_spans), across, pd.concat([passages, hits], ignore_index=True),
                       answers[["question_id", "answer"]], index_dir, support_threshold, uncertainty_band)


__all__ = ["chunk_split", "chunk_windows", "mark_splits", "window_passages"]
