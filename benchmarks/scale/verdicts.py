"""Every local-judge verdict row over a scale workspace, to check a judge change changes nothing.

    .venv/bin/python -m benchmarks.scale.verdicts WS [--answers 1000] [--dump rows.json] [--repeats 1]

WS is a workspace from benchmarks/scale/generate.py (corpus.jsonl, chunks.jsonl,
questions.csv, runs/scale.jsonl). The first --answers answers are split into claims as
the local judge splits them, and each claim is judged against every chunk its answer
retrieved, as the pipeline's extract step asks (`whole_answer` for a one-claim answer).
--dump writes every row (verdict, confidence, support, quote, quote_start, reason, marks)
with its (answer, claim, passage) key as JSON: two dumps of the same workspace, before
and after a change, must be byte-identical (`cmp`).

Prints the pairs judged and the CPU seconds (process time) the local judge's rows take
over them (`local._judge_rows`: what each worker process runs), in this process with cold
caches, the least of --repeats.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

from ragspan.tasks.judges.local import _judge_rows, split_claims
from ragspan.tasks.judges.verifier import model_path

JudgeItem = tuple[str, list[str], str, bool]


def judge_items(ws: Path, answers: int) -> tuple[list[tuple[str, int, list[str]]], list[JudgeItem]]:
    """(keys, items): per claim of the first `answers` answers, its key (question id, claim
    index, chunk ids) and the judge's item (claim, passages, question, whole answer)."""
    docs = {d["doc_id"]: d["text"] for d in map(json.loads, (ws / "corpus.jsonl").open(encoding="utf-8"))}
    chunks = {c["chunk_id"]: docs[c["doc_id"]][c["char_start"]:c["char_end"]]
              for c in map(json.loads, (ws / "chunks.jsonl").open(encoding="utf-8"))}
    with (ws / "questions.csv").open(encoding="utf-8") as f:
        questions = {r["question_id"]: r["question"] for r in csv.DictReader(f)}
    keys, items = [], []
    with (ws / "runs" / "scale.jsonl").open(encoding="utf-8") as f:
        for _, line in zip(range(answers), f, strict=False):
            a = json.loads(line)
            ids = [r["chunk_id"] for r in a["retrieved"]]
            claims = split_claims(a["answer"])
            for k, c in enumerate(claims):
                keys.append((a["question_id"], k, ids))
                items.append((c.text, [chunks[i] for i in ids], questions.get(a["question_id"], ""), len(claims) == 1))
    return keys, items


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ws", type=Path)
    ap.add_argument("--answers", type=int, default=1000)
    ap.add_argument("--dump", type=Path, default=None)
    ap.add_argument("--repeats", type=int, default=1)
    a = ap.parse_args(argv)
    keys, items = judge_items(a.ws, a.answers)
    cpu = float("inf")
    rows: list = []
    for _ in range(a.repeats):
        _clear_caches()  # a cold process: the verifier and every cache of its modules
        t0 = time.process_time()
        rows = _judge_rows(str(model_path()), items)  # what the local judge runs, in-process or in a worker
        cpu = min(cpu, time.process_time() - t0)
    pairs = sum(len(i[1]) for i in items)
    print(json.dumps({"answers": a.answers, "claims": len(items), "pairs": pairs, "rows_cpu_s": round(cpu, 3)}))
    if a.dump:
        out = [{"question_id": q, "claim": k, "chunk_id": cid, "row": list(r)}
               for (q, k, ids), claim_rows in zip(keys, rows, strict=True)
               for cid, r in zip(ids, claim_rows, strict=True)]
        a.dump.write_text(json.dumps(out, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    return 0


def _clear_caches() -> None:
    """Every cache of the verifier's modules and of core.text: a cold process."""
    import functools
    import sys

    for name, module in list(sys.modules.items()):
        if not name.startswith(("ragspan.tasks.judges.verifier", "ragspan.tasks.core.text")):
            continue
        for obj in vars(module).values():
            if isinstance(obj, functools._lru_cache_wrapper):
                obj.cache_clear()
            elif isinstance(obj, dict) and type(obj).__name__ in ("_ByMatch", "_ByRawMatch"):
                obj.clear()  # per-distinct-word lookups


if __name__ == "__main__":
    raise SystemExit(main())
