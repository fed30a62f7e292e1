"""RAGTruth dev (`../shared/data/ragtruth_dev`, see its LOADER.md) as ragspan inputs.

Read-only from `RAGSPAN_BENCH_DATA` (default `<repo>/../shared/data`); the data directory
is written to a temporary folder at run time, never into the repository.

Mapping (LOADER.md): each passage of a QA record (`passages` split at `\\n\\npassage N:`)
or the business record of a data2txt record (as JSON text) is one document; each response
is one answer whose retrieved list is all of its record's documents, every one in
context; the question is the record's question (data2txt: "write an overview of this
business"). Gold: the union of `labels[].start:end`, code points into the response.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("RAGSPAN_BENCH_DATA", REPO.parent / "shared" / "data"))
RAGTRUTH = DATA / "ragtruth_dev"
SETS: tuple[str, ...] = ("qa_dev", "data2txt")
DATA2TXT_QUESTION = "write an overview of this business"
RUN = "ragtruth"
_PASSAGE = re.compile(r"(?:^|\n\n)passage \d+:")


@dataclass
class Answer:
    """One response of RAGTruth: what ragspan evaluates as one answer."""

    set: str
    question_id: str  # the answer's id in the data directory
    source_id: int  # RAGTruth's question / record: the unit a split never cuts
    model: str
    question: str
    passages: list[str]
    response: str
    labels: list[dict] = field(default_factory=list)  # start, end, text, label_type

    @property
    def hallucinated(self) -> bool:
        return bool(self.labels)


def split_passages(passages: str) -> list[str]:
    """"passage 1:A\\n\\npassage 2:B\\n\\n" → ["A", "B"] (each stripped; empty ones dropped)."""
    parts = _PASSAGE.split(passages)
    return [p.strip() for p in parts if p.strip()]


def half(source_id: int | str) -> str:
    """`tune` or `report`: a deterministic split by question (sha1 of the source id)."""
    digest = hashlib.sha1(str(source_id).encode("utf-8")).digest()
    return "tune" if digest[0] % 2 == 0 else "report"


def load(name: str, limit: int | None = None) -> list[Answer]:
    """The answers of set `name` (qa_dev | data2txt) in file order; `limit` keeps the first N."""
    if name not in SETS:
        raise ValueError(f"unknown set {name!r}; expected one of {', '.join(SETS)}")
    answers: list[Answer] = []
    with open(RAGTRUTH / f"{name}.jsonl", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            rec = json.loads(line)
            src = rec["source"]
            if name == "qa_dev":
                question, passages = src["question"], split_passages(src["passages"])
            else:
                question, passages = DATA2TXT_QUESTION, [json.dumps(src, ensure_ascii=False)]
            for k, resp in enumerate(rec["responses"]):
                text = resp["response"]
                for lab in resp["labels"]:
                    if text[lab["start"] : lab["end"]] != lab["text"]:
                        raise ValueError(f"{name} {rec['source_id']}: label offsets do not match")
                answers.append(
                    Answer(name, f"{rec['source_id']}-{k}", rec["source_id"], resp["model"],
                           question, passages, text, resp["labels"])
                )
    return answers[:limit] if limit else answers


def doc_ids(a: Answer) -> list[str]:
    return [f"{a.source_id}-p{i + 1}" for i in range(len(a.passages))]


def _write_jsonl(path: Path, records: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def write_data_dir(answers: list[Answer], root: Path) -> Path:
    """corpus.jsonl, questions.jsonl and runs/ragtruth.jsonl (docs/inputs.md) under root."""
    corpus: dict[str, dict] = {}
    questions, run = [], []
    for a in answers:
        ids = doc_ids(a)
        for d, text in zip(ids, a.passages, strict=True):
            corpus.setdefault(d, {"doc_id": d, "text": text, "set": a.set})
        questions.append({"question_id": a.question_id, "question": a.question,
                          "model": a.model, "source_id": str(a.source_id)})
        run.append({
            "question_id": a.question_id,
            "answer": a.response,
            "retrieved": [{"doc_id": d, "char_start": 0, "char_end": len(t), "in_context": True}
                          for d, t in zip(ids, a.passages, strict=True)],
        })
    (root / "runs").mkdir(parents=True, exist_ok=True)
    _write_jsonl(root / "corpus.jsonl", list(corpus.values()))
    _write_jsonl(root / "questions.jsonl", questions)
    _write_jsonl(root / "runs" / f"{RUN}.jsonl", run)
    return root
