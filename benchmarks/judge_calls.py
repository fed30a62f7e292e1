"""Judge calls and prompt tokens per claim for the openai judge, against the naive procedure,
and what concurrency does to wall time — through the scripted OpenAI-compatible server.

    .venv/bin/python -m benchmarks.judge_calls [--delay 0.1] [--calls 40]

1. Evaluates the bundled sample with `--judge openai` against the fake server (real HTTP)
   and counts requests and prompt characters (≈ tokens × 4) per claim. The naive count,
   on the same inputs, is the seed article's procedure: one call per claim per retrieved
   chunk, plus one per claim per corpus chunk for each claim nothing retrieved supports.
2. With the server adding `--delay` seconds per call, times `judge_many` over `--calls`
   single-passage claims at concurrency 1, 4 and 8, against calls × delay / concurrency.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from benchmarks._support.fake_openai_server import FakeOpenAIServer


def evaluate_sample(server: FakeOpenAIServer, work: Path) -> dict:
    import pandas as pd
    from ragspan.flows.cli import main

    out = work / "out"
    code = main(["evaluate", "--data", str(REPO / "data" / "sample"), "--run", "baseline", "--judge", "openai",
                 "--model", "fake-model", "--base-url", server.url, "--out", str(out), "--quiet",
                 "--params", str(REPO / "params.yaml")])
    assert code == 0
    diagnoses = pd.read_parquet(out / "diagnoses.parquet")
    claims = len(diagnoses)
    corpus = pd.read_json(REPO / "data" / "sample" / "corpus.jsonl", lines=True)
    chunks = pd.read_json(REPO / "data" / "sample" / "chunks.jsonl", lines=True)
    runs = [json.loads(line) for line in (REPO / "data/sample/runs/baseline.jsonl").read_text().splitlines()]
    retrieved = {r["question_id"]: len(r["retrieved"]) for r in runs}
    unsupported = diagnoses["label"].isin(["retrieval_miss", "synthesis_error", "hallucination"])
    naive = int(sum(retrieved[q] for q in diagnoses["question_id"]) + unsupported.sum() * len(chunks))
    prompt_chars = sum(len(json.dumps(b.get("messages", []), ensure_ascii=False)) for b in server.requests)
    return {
        "claims": claims, "documents": len(corpus), "chunks": len(chunks),
        "calls": server.count, "calls_per_claim": round(server.count / claims, 3),
        "naive_calls": naive, "naive_calls_per_claim": round(naive / claims, 2),
        "ratio_to_naive": round(server.count / naive, 4),
        "prompt_tokens_per_claim_est": round(prompt_chars / 4 / claims),
    }


def concurrency(delay: float, calls: int) -> list[dict]:
    from ragspan.tasks.config import JudgeParams
    from ragspan.tasks.judges.openai_judge import OpenAIJudge, openai_spec

    rows = []
    items = [(f"Claim number {i} is about storage.", [f"Passage {i}: claim number {i} is about storage."])
             for i in range(calls)]
    for conc in (1, 4, 8):
        with FakeOpenAIServer(delay=delay) as server:
            params = JudgeParams(kind="openai", model="fake", base_url=server.url, max_concurrency=conc, cache=False)
            judge = OpenAIJudge(openai_spec(params))
            t = time.perf_counter()
            judge.judge_many(items)
            wall = time.perf_counter() - t
            rows.append({"concurrency": conc, "calls": server.count, "wall_s": round(wall, 2),
                         "ideal_s": round(calls * delay / conc, 2), "max_in_flight": server.max_in_flight})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--delay", type=float, default=0.1)
    ap.add_argument("--calls", type=int, default=40)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["RAGSPAN_HOME"] = str(Path(tmp) / "state")
        from ragspan.tasks.supervision.runtime import configure_prefect

        configure_prefect()
        with FakeOpenAIServer() as server:
            sample = evaluate_sample(server, Path(tmp))
        conc = concurrency(args.delay, args.calls)
    print("sample, openai judge vs naive procedure:")
    for k, v in sample.items():
        print(f"  {k:<30} {v}")
    print(f"\nconcurrency, {args.delay * 1000:.0f} ms per call, {args.calls} calls:")
    print(f"  {'concurrency':>11} {'wall s':>8} {'ideal s':>8} {'in flight':>9}")
    for r in conc:
        print(f"  {r['concurrency']:>11} {r['wall_s']:>8} {r['ideal_s']:>8} {r['max_in_flight']:>9}")
    out = REPO / "benchmarks" / "results" / "judge_calls.json"
    out.write_text(json.dumps({"sample": sample, "concurrency": conc}, indent=2) + "\n")
    print(f"\nwritten: {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
