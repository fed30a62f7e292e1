"""Any table → Imported records, given which column holds what (`--map FIELD=COLUMN`).

Fields: `question`, `answer` (required), `contexts` (a list of passage texts), and
optional `question_id`, `reference`, `doc_ids` and `scores` (lists parallel to
`contexts`). List cells are JSON/Parquet lists, or in CSV a JSON array (or a Python list
literal). Without `question_id`, the id is the row number.
"""

from __future__ import annotations

from pathlib import Path

from ragspan.tasks.errors import InputError, UsageError
from ragspan.tasks.inputs.imports import values
from ragspan.tasks.inputs.imports.file_kinds import table_source
from ragspan.tasks.inputs.imports.model import Context, Imported, Parsed, Skipped

FIELDS = ("question", "answer", "contexts", "question_id", "reference", "doc_ids", "scores")
REQUIRED = ("question", "answer", "contexts")


def parse_map(pairs: list[str]) -> dict[str, str]:
    """`FIELD=COLUMN` pairs → {field: column}; UsageError on an unknown field or a bad pair."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, column = pair.partition("=")
        name = name.strip()
        if not sep or not column:
            raise UsageError(f"--map {pair!r}: expected FIELD=COLUMN")
        if name not in FIELDS:
            raise UsageError(f"--map {pair!r}: unknown field {name!r} (fields: {', '.join(FIELDS)})")
        if name in out:
            raise UsageError(f"--map: {name} is mapped twice")
        out[name] = column
    missing = [f for f in REQUIRED if f not in out]
    if missing:
        raise UsageError(f"--map needs {', '.join(f + '=COLUMN' for f in missing)}")
    return out


def parse(path: Path, mapping: dict[str, str]) -> Parsed:
    path = Path(path)
    df, csv = table_source(path, 'mapping')
    for name, column in mapping.items():
        if column not in df.columns:
            raise InputError(path, None, column, f"no such column (mapped to {name}); columns: "
                                                 f"{', '.join(map(str, df.columns)) or 'none'}")
    out = Parsed(records=[])
    used = set(mapping.values())
    seen: dict[str, int] = {}
    width = len(str(len(df)))
    for row, rec in zip(df.index, df.to_dict("records"), strict=True):
        rec = {k: (None if csv and v == "" else v) for k, v in rec.items()}
        col = mapping.get
        qid = values.identifier(path, row, mapping["question_id"], rec[mapping["question_id"]]) \
            if "question_id" in mapping else f"row-{row:0{width}d}"
        if not qid.strip():
            raise InputError(path, row, mapping["question_id"], "empty string")
        if qid in seen:
            raise InputError(path, row, mapping["question_id"], f"duplicate id {qid!r} (first at row {seen[qid]})")
        seen[qid] = row
        question = values.text(path, row, mapping["question"], rec[mapping["question"]], optional=True) or ""
        answer = values.text(path, row, mapping["answer"], rec[mapping["answer"]], optional=True)
        texts = values.text_list(path, row, mapping["contexts"], rec[mapping["contexts"]], optional=True,
                                  csv=csv) or []
        ids = values.id_list(path, row, col("doc_ids", ""), rec[mapping["doc_ids"]], csv=csv) if "doc_ids" in mapping else None
        scores = (values.score_list(path, row, col("scores", ""), rec[mapping["scores"]], csv=csv)
                  if "scores" in mapping else None)
        for name, parallel in (("doc_ids", ids), ("scores", scores)):
            if parallel is not None and len(parallel) != len(texts):
                raise InputError(path, row, mapping[name], f"{len(parallel)} values for {len(texts)} contexts "
                                                           f"(column {mapping['contexts']!r})")
        reference = (values.text(path, row, mapping["reference"], rec[mapping["reference"]], optional=True)
                     if "reference" in mapping else None)
        for name, value in rec.items():
            if name not in used and value is not None:
                out.unmapped[str(name)] += 1
        if answer is None or not answer.strip():
            out.skipped.append(Skipped(f"row {row}", f"no answer in column {mapping['answer']!r}"))
            continue
        contexts = tuple(Context(text=t, ids=(("doc_ids", ids[j]),) if ids and ids[j] is not None else (),
                                 score=scores[j] if scores else None)
                         for j, t in enumerate(texts))
        out.records.append(Imported(question_id=qid, question=question, answer=answer, contexts=contexts,
                                    reference=reference, source=f"row {row}"))
    return out
