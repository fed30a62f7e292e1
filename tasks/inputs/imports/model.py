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
    # The ids the source gives for its document, most trusted first, each with where it was
    # read (`document.id`, `document.metadata.source`, …): the first the corpus knows is used.
    ids: tuple[tuple[str, str], ...] = ()
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


BY_TEXT = "text"  # how a context with no id the corpus knows was located


def build(parsed: Parsed, doc_ids: list[str], texts: list[str]) -> Built:
    """Questions rows, run records (each context as doc_id + offsets, located in the
    corpus) and the report: every context not found is listed, with its answer and rank,
    and how each context was located (`located_by`: the id's source field, or text)."""
    index = CorpusTextIndex(doc_ids, texts)
    by_id = dict(zip(doc_ids, texts, strict=True))
    questions, runs, unlocated, notes = [], [], [], list(parsed.notes)
    counts = Counter[str]()
    located_by = Counter[str]()
    for rec in parsed.records:
        items = []
        for rank, ctx in enumerate(rec.contexts, 1):
            known, via = corpus_id(ctx.ids, by_id)
            hit = index.locate(ctx.text, known)
            counts["contexts"] += 1
            if hit is None:
                counts["not_found"] += 1
                unlocated.append({
                    "question_id": rec.question_id, "source": rec.source, "rank": rank,
                    "doc_id": known or (ctx.ids[0][1] if ctx.ids else None), "chars": len(ctx.text),
                    "text": ctx.text if len(ctx.text) <= _PREVIEW else ctx.text[:_PREVIEW] + "…",
                    "reason": ("blank text" if not ctx.text.strip() else
                               f"not in document {known!r} (from {via})" if known else "not found in the corpus"),
                })
                continue
            doc, start, end = hit
            counts["exact" if by_id[doc][start:end] == ctx.text else "whitespace_loose"] += 1
            located_by[via] += 1
            if ctx.ids and known is None:
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
        notes.append(f"{counts['doc_id_not_in_corpus']} context(s) carried document ids the corpus does not "
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
        "located_by": dict(located_by.most_common()),
        "answers_without_any_located_context": sum(1 for r in runs if not r["retrieved"]),
        "skipped": [{"source": s.source, "reason": s.reason} for s in parsed.skipped],
        "not_located_contexts": unlocated,
        "fields_not_mapped": dict(sorted(parsed.unmapped.items())),
        "notes": notes,
    }
    return Built(questions, runs, report)


def corpus_id(ids: tuple[tuple[str, str], ...], by_id: dict[str, str]) -> tuple[str | None, str]:
    """(the corpus document the first known id names, where that id was read), else
    (None, "text"). An id that is a path ending in a corpus id (`/home/me/docs/faq/a.md`
    for `faq/a.md`, as LlamaIndex's `file_path` and LangChain's `source` hold) names it too."""
    for via, value in ids:
        if value in by_id:
            return value, via
        parts = value.replace("\\", "/").split("/")
        for i in range(1, len(parts)):
            doc = "/".join(parts[i:])
            if doc in by_id:
                return doc, via
    return None, BY_TEXT

