"""Every local-judge verdict row over a scale workspace, to check a judge change changes nothing.

    .venv/bin/python -m benchmarks.scale.verdicts WS [--answers 1000] [--dump rows.json] [--repeats 1]
        [--check] [--compare rows-before.json] [--bulk] [--fixed] [--open]

WS is a workspace from benchmarks/scale/generate.py (corpus.jsonl, chunks.jsonl,
questions.csv, runs/scale.jsonl). The first --answers answers are split into claims as
the local judge splits them, and each claim is judged against every chunk its answer
retrieved, as the pipeline's extract step asks (`whole_answer` for a one-claim answer).
--dump writes every row (verdict, confidence, support, quote, quote_start, reason, marks)
with its (answer, claim, passage) key and what the pair competes with for the marks, as
JSON: two dumps of the same workspace, before and after a change, must be byte-identical
(`cmp`, or `--compare BEFORE`: the rows judged now against a dump written before). `--check` judges the rows again with the verifier's
caches warm (what a worker does for its second batch) and compares them with the rows
judged with cold caches: they must be identical. `--bulk` judges them again through the
local judge's own path — the pairs that need no model decided in bulk, never stored, the
others through a fresh verdict cache — and compares the verdicts with every pair judged. Exit status 1 when a comparison differs.
`--fixed` times the bulk decision alone: `Verifier.fixed_rows` over the items, cold caches,
the least of --repeats (CPU seconds, and the pairs it fixes). `--open` times what a judge
worker runs: only the pairs the bulk decision leaves to the model, cold caches, the least of
--repeats, with the sha256 of their rows (two checkouts' digests must be equal).

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
    ap.add_argument("--check", action="store_true", help="rows judged with warm caches == with cold ones")
    ap.add_argument("--compare", type=Path, default=None, help="a --dump written before: the rows must equal it")
    ap.add_argument("--bulk", action="store_true",
                    help="the judge's own path (pairs that need no model decided in bulk, the others through "
                         "a fresh verdict cache) == every pair judged by the model")
    ap.add_argument("--fixed", action="store_true",
                    help="the CPU seconds of the bulk decision alone (Verifier.fixed_rows), cold caches")
    ap.add_argument("--open", action="store_true",
                    help="the CPU seconds of the pairs the bulk decision leaves to the model, and their rows' sha256")
    a = ap.parse_args(argv)
    keys, items = judge_items(a.ws, a.answers)
    if a.fixed:
        print(json.dumps({"answers": a.answers, "claims": len(items), **_fixed_cpu(items, a.repeats)}))
        return 0
    if a.open:
        print(json.dumps({"answers": a.answers, "claims": len(items), **_open_cpu(items, a.repeats)}))
        return 0
    rows, cpu = _judged_cold(items, a.repeats)
    pairs = sum(len(i[1]) for i in items)
    report = {"answers": a.answers, "claims": len(items), "pairs": pairs, "rows_cpu_s": round(cpu, 3)}
    dump = dump_text(keys, rows)
    if a.check:  # the caches are warm now: the same items again
        report["cached_equals_fresh"] = dump_text(keys, _judge_rows(str(model_path()), items)) == dump
    if a.compare:
        report["equals_compared_dump"] = a.compare.read_text(encoding="utf-8") == dump
    if a.bulk:
        report.update(_bulk_equals(items, rows[0]))
    print(json.dumps(report))
    if a.dump:
        a.dump.write_text(dump, encoding="utf-8")
    return 0 if all(report.get(k, True) for k in ("cached_equals_fresh", "equals_compared_dump", "bulk_equals")) else 1


def _bulk_equals(items: list[JudgeItem], rows: list[list[tuple]]) -> dict:
    """The verdicts the local judge gives through its own path (verifier.fixed_rows, then the
    rest through a verdict cache in a temporary file) against `rows`, every pair judged."""
    import tempfile

    from ragspan.tasks.judges.base import JudgeRuntime, JudgeSpec
    from ragspan.tasks.judges.local import LocalJudge, _from_row

    with tempfile.TemporaryDirectory() as tmp:
        judge = LocalJudge(JudgeSpec(), JudgeRuntime(verdict_cache=str(Path(tmp) / "verdicts.sqlite")))
        got = judge.judge_many(items)
    want = [[_from_row(r) for r in claim_rows] for claim_rows in rows]
    return {"bulk_equals": got == want, "pairs_decided": judge.stats.pairs_decided,
            "pairs_judged_by_model": judge.stats.pairs_judged}


def _fixed_cpu(items: list[JudgeItem], repeats: int) -> dict:
    """CPU seconds of `Verifier.fixed_rows` over `items` in a cold process (the least of
    `repeats`), and the pairs it fixes."""
    from ragspan.tasks.judges.verifier import verifier

    cpu, fixed = float("inf"), 0
    for _ in range(repeats):
        _clear_caches()
        v = verifier(model_path())
        t0 = time.process_time()
        rows = v.fixed_rows(items)
        cpu = min(cpu, time.process_time() - t0)
        fixed = sum(r is not None for claim_rows in rows for r in claim_rows)
    return {"pairs": sum(len(i[1]) for i in items), "pairs_fixed": fixed, "fixed_rows_cpu_s": round(cpu, 3)}


def _judged_cold(items: list[JudgeItem], repeats: int) -> tuple[tuple[list, list], float]:
    """(`_judge_rows` of the items — what the local judge runs, in-process or in a worker —
    and its CPU seconds with cold caches, the least of `repeats`)."""
    cpu = float("inf")
    rows: tuple[list, list] = ([], [])
    for _ in range(repeats):
        _clear_caches()  # a cold process: the verifier and every cache of its modules
        t0 = time.process_time()
        rows = _judge_rows(str(model_path()), items)
        cpu = min(cpu, time.process_time() - t0)
    return rows, cpu


def _open_cpu(items: list[JudgeItem], repeats: int) -> dict:
    """CPU seconds of `_judge_rows` over the pairs `Verifier.fixed_rows` leaves open (what
    the local judge sends its workers), cold caches, the least of `repeats`; the sha256 of
    the rows and what each pair competes with."""
    import hashlib

    from ragspan.tasks.judges.verifier import verifier

    fixed = verifier(model_path()).fixed_rows(items)
    asked = [(c, [p for p, f in zip(ps, fx, strict=True) if f is None], q, w)
             for (c, ps, q, w), fx in zip(items, fixed, strict=True) if None in fx]
    rows, cpu = _judged_cold(asked, repeats)
    digest = hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode("utf-8")).hexdigest()
    return {"open_claims": len(asked), "open_pairs": sum(len(i[1]) for i in asked), "open_rows_cpu_s": round(cpu, 3),
            "rows_sha256": digest}


def dump_text(keys: list[tuple[str, int, list[str]]], judged: tuple[list, list]) -> str:
    """Every verdict row with its (answer, claim, passage) key and what the pair competes
    with for the marks (`_judge_rows`' two lists), as the JSON --dump writes."""
    rows, competing = judged
    out = [{"question_id": q, "claim": k, "chunk_id": cid, "row": list(r), "competing": c}
           for (q, k, ids), claim_rows, claim_competing in zip(keys, rows, competing, strict=True)
           for cid, r, c in zip(ids, claim_rows, claim_competing, strict=True)]
    return json.dumps(out, ensure_ascii=False, indent=0) + "\n"


def _clear_caches() -> None:
    """Every cache of the verifier's modules and of core.text: a cold process."""
    import functools
    import sys

    for name, module in list(sys.modules.items()):
        if not name.startswith(("ragspan.tasks.judges.verifier", "ragspan.tasks.core.text")):
            continue
        for obj in vars(module).values():
            if isinstance(obj, functools._lru_cache_wrapper) or type(obj).__name__ == "BulkBound":
                obj.cache_clear()  # (BulkBound: verifier/bulk.py's norm ids and arrays)
            elif isinstance(obj, dict) and type(obj).__name__ in ("_ByMatch", "_ByRawMatch"):
                obj.clear()  # per-distinct-word lookups


if __name__ == "__main__":
    raise SystemExit(main())
