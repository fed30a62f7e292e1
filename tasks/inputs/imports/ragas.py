"""RAGAS `EvaluationDataset` files → Imported records.

The single-turn sample of ragas 0.2 to 0.4.3 (`ragas.dataset_schema.SingleTurnSample`):
`user_input`, `retrieved_contexts`, `reference_contexts`, `response`, `multi_responses`,
`reference`, `rubric(s)` — all optional there. `EvaluationDataset.to_jsonl` writes one
sample per line with unset fields left out; `to_csv` writes list fields as Python list
literals (`['a', 'b']`). Both are read here; the question id is the row number.

    user_input          → questions.question ("" when absent)
    response            → the answer (a sample without one is skipped and listed)
    retrieved_contexts  → retrieved, rank order, located in the corpus
    retrieved_context_ids (newer ragas, optional) → the documents to locate them in
    reference           → questions.reference_answer
    reference_contexts, multi_responses, rubric(s), other columns → listed as not mapped
"""

from __future__ import annotations

from pathlib import Path

from ragspan.tasks.errors import InputError
from ragspan.tasks.inputs.imports import values
from ragspan.tasks.inputs.imports.file_kinds import table_source
from ragspan.tasks.inputs.imports.model import Context, Imported, Parsed, Skipped

MAPPED = ("user_input", "response", "retrieved_contexts", "retrieved_context_ids", "reference")


def parse(path: Path) -> Parsed:
    path = Path(path)
    df, csv = table_source(path, 'ragas')
    if "user_input" not in df.columns and "response" not in df.columns:
        raise InputError(path, None, "response", "missing: not a RAGAS EvaluationDataset (no user_input or "
                                                 f"response column; columns: {', '.join(map(str, df.columns)) or 'none'})")
    out = Parsed(records=[])
    width = len(str(len(df)))
    for row, rec in zip(df.index, df.to_dict("records"), strict=True):
        rec = {k: (None if csv and v == "" else v) for k, v in rec.items()}
        if isinstance(rec.get("user_input"), list):
            raise InputError(path, row, "user_input", "a multi-turn sample (a list of messages): only single-turn "
                                                      "samples have one answer and its retrieved contexts")
        question = values.text(path, row, "user_input", rec.get("user_input"), optional=True) or ""
        answer = values.text(path, row, "response", rec.get("response"), optional=True)
        contexts = values.text_list(path, row, "retrieved_contexts", rec.get("retrieved_contexts"), optional=True,
                                      csv=csv)
        ids = values.id_list(path, row, "retrieved_context_ids", rec.get("retrieved_context_ids"), csv=csv)
        if ids is not None and len(ids) != len(contexts or ()):
            raise InputError(path, row, "retrieved_context_ids", f"{len(ids)} ids for {len(contexts or ())} "
                                                                 "retrieved_contexts")
        reference = values.text(path, row, "reference", rec.get("reference"), optional=True)
        for name, value in rec.items():
            if name not in MAPPED and value is not None:
                out.unmapped[str(name)] += 1
        qid = f"row-{row:0{width}d}"
        if answer is None or not answer.strip():
            out.skipped.append(Skipped(f"row {row}", "no response: nothing to evaluate"))
            continue
        if contexts is None:
            out.notes.append(f"row {row}: no retrieved_contexts (evaluated against nothing retrieved)")
        out.records.append(Imported(
            question_id=qid, question=question, answer=answer, reference=reference, source=f"row {row}",
            contexts=tuple(Context(text=c, ids=_ids(ids[j] if ids else None)) for j, c in enumerate(contexts or ()))))
    return out


def _ids(doc_id: str | None) -> tuple[tuple[str, str], ...]:
    return (("retrieved_context_ids", doc_id),) if doc_id is not None else ()
