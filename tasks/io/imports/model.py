"""The records every importer produces, and the one step they share: placing contexts in
the corpus and laying the result out as a questions table, run records and a report."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ragspan.tasks.core.locate import CorpusTextIndex

# How much of a context the report quotes.
_PREVIEW = 120


@dataclass(frozen=True)
class Context:
    """One retrieved passage as the source gives it."""

    text: str
    doc_id: str | None = None  # the source's id for it: used when the corpus knows it
    score: float | None = None


@dataclass(frozen=True)
class Imported:
    """One answer to evaluate: its question and retrieved contexts, rank order."""

    question_id: str
    question: str
    answer: str
    contexts: tuple[Context, ...]
    reference: str | None = None
    source: str = ""  # where in the file: "row 3", "trace 1f2e…"


@dataclass(frozen=True)
class Skipped:
    """A record that could not become an answer to evaluate, and why."""

    source: str
    reason: str


@dataclass
class Parsed:
    """What a format module read: the records, the ones it had to skip, the fields of the
    source that ragspan has no place for (name → how many records had them), notes."""

    records: list[Imported]
    skipped: list[Skipped] = field(default_factory=list)
    unmapped: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)


@dataclass
class Built:
    questions: list[dict[str, Any]]
    runs: list[dict[str, Any]]
    report: dict[str, Any]


def build(parsed: Parsed, doc_ids: list[str], texts: list[str]) -> Built:
    """Questions rows, run records (each context as doc_id + offsets, located in the
    corpus) and the report: every context not found is listed, with its answer and rank."""
    index = CorpusTextIndex(doc_ids, texts)
    by_id = dict(zip(doc_ids, texts, strict=True))
    questions, runs, unlocated, notes = [], [], [], list(parsed.notes)
    counts = Counter[str]()
    for rec in parsed.records:
        items = []
        for rank, ctx in enumerate(rec.contexts, 1):
            known = ctx.doc_id if ctx.doc_id in by_id else None
            hit = index.locate(ctx.text, known)
            counts["contexts"] += 1
            if hit is None:
                counts["not_found"] += 1
                unlocated.append({
                    "question_id": rec.question_id, "source": rec.source, "rank": rank,
                    "doc_id": ctx.doc_id, "chars": len(ctx.text),
                    "text": ctx.text if len(ctx.text) <= _PREVIEW else ctx.text[:_PREVIEW] + "…",
                    "reason": ("blank text" if not ctx.text.strip() else
                               f"not in document {known!r}" if known else "not found in the corpus"),
                })
                continue
            doc, start, end = hit
            counts["exact" if by_id[doc][start:end] == ctx.text else "whitespace_loose"] += 1
            if ctx.doc_id is not None and known is None:
                counts["doc_id_not_in_corpus"] += 1
            item: dict[str, Any] = {"doc_id": doc, "char_start": start, "char_end": end}
            if ctx.score is not None:
                item["score"] = ctx.score
            items.append(item)
        question: dict[str, Any] = {"question_id": rec.question_id, "question": rec.question}
        if rec.reference is not None:
            question["reference_answer"] = rec.reference
        questions.append(question)
        # Every context the source gave went to the model: all of them are in the window.
        runs.append({"question_id": rec.question_id, "answer": rec.answer, "retrieved": items,
                     "context_k": len(items)})
    if counts["doc_id_not_in_corpus"]:
        notes.append(f"{counts['doc_id_not_in_corpus']} context(s) carried a document id the corpus does not "
                     "have: they were located by their text alone")
    if any("reference_answer" in q for q in questions):
        for q in questions:
            q.setdefault("reference_answer", None)
    report = {
        "answers": len(runs),
        "contexts": counts["contexts"],
        "located_exact": counts["exact"],
        "located_whitespace_loose": counts["whitespace_loose"],
        "not_located": counts["not_found"],
        "answers_without_any_located_context": sum(1 for r in runs if not r["retrieved"]),
        "skipped": [{"source": s.source, "reason": s.reason} for s in parsed.skipped],
        "not_located_contexts": unlocated,
        "fields_not_mapped": dict(sorted(parsed.unmapped.items())),
        "notes": notes,
    }
    return Built(questions, runs, report)
