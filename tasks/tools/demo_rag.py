"""A small demo RAG system for the bundled sample, so the watchdog loop — rebuild the
index → answer the questions → evaluate → compare with the previous run — runs offline.

Two parts, both deterministic:

- **retriever**: a real BM25 index (bm25s) over the chunks of the data directory, using
  the same terms as ragspan's corpus search (`index_terms`). Its *version* is an
  `IndexSpec`: how many chunks of each document are indexed (`chunks_per_doc`, 0 = all)
  and whether the top candidates are reranked by their best-matching sentence
  (`rerank`). Long document headers dilute first chunks (data/sample/README.md), so
  plain BM25 ranks some evidence below the context cut-off; the reranker fixes that, and
  indexing every chunk fixes the misses.
- **answerer**: extractive. For each question it knows the *gold* sentence — the corpus
  sentence that best covers the question (and its reference answer when given),
  searched over every chunk whatever the index holds, like a model that knows the
  answer — and answers with it. A stable hash of the question id picks a behaviour:
  `faithful` (answer with the gold sentence; the diagnosis then depends on where the
  retriever put its chunk: in context → `correct`, retrieved below the cut-off →
  `rank_failure`, never retrieved → `retrieval_miss`), `misread` (the best sentence with a
  number from the top context chunk, with that number changed → `synthesis_error`) or
  `invent` (a sentence about nothing in the corpus → `hallucination`).

`demo_run(...)` returns the run records (docs/design.md §3) and, per question, the label the demo
meant to cause (`intended`), which the tests compare with ragspan's diagnosis.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import bm25s
import pandas as pd
from ragspan.tasks.core.text import sentence_spans
from ragspan.tasks.inputs.load import load_workspace
from ragspan.tasks.state import store_path, write_atomic_dir
from ragspan.tasks.steps.corpus_search import index_terms
from ragspan.tasks.tools.demo_rag_args import PRESETS, add_arguments

DEMO_INDEX_FORMAT = "demo-bm25-1"
RERANK_POOL = 12  # BM25 candidates the reranker reorders
MIN_SENTENCE_TERMS = 4  # shorter "sentences" (titles, labels) are never answers

# Sentences about nothing in the sample corpus (no content word in common with it).
_INVENTED = (
    "Every answer is reviewed by the Lisbon harp quartet before midnight.",
    "Penguins audit the lighthouse ledger during the autumn solstice festival.",
    "The violet zeppelin guild approves such requests after a juggling contest.",
    "A marzipan committee in Reykjavik decides this by rolling enchanted dice.",
)


@dataclass(frozen=True)
class IndexSpec:
    """What a demo index version is: which chunks it holds, how it ranks, how much of
    the ranking goes into the context window."""

    version: str = "v1"
    chunks_per_doc: int = 2   # index only the first N chunks of each document (0 = all)
    rerank: bool = False      # reorder the top BM25 candidates by best-sentence overlap
    top_k: int = 5            # chunks retrieved per question
    context_k: int = 2        # of those, how many go into the context window


# Named versions (PRESETS) and the command's arguments live in demo_rag_args.py, which
# imports nothing heavy, so `ragspan --help` does not load BM25 or pandas.


def spec_for(version: str, **overrides) -> IndexSpec:
    """The IndexSpec of a version name, with explicit (non-None) overrides applied."""
    base = dict(PRESETS.get(version, {}))
    base.update({k: v for k, v in overrides.items() if v is not None})
    return IndexSpec(version=version, **base)


def _stable(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:12], 16)


def behaviour(question_id: str) -> str:
    """The answerer's deterministic behaviour for one question (about 6:3:1)."""
    bucket = _stable(question_id) % 10
    return "faithful" if bucket < 6 else "misread" if bucket < 9 else "invent"


def _chunk_texts(corpus: pd.DataFrame, chunks: pd.DataFrame) -> pd.DataFrame:
    texts = dict(zip(corpus["doc_id"], corpus["text"]))
    out = chunks[["chunk_id", "doc_id", "char_start", "char_end"]].copy().reset_index(drop=True)
    out["text"] = [texts[d][s:e] for d, s, e in zip(out["doc_id"], out["char_start"], out["char_end"])]
    return out


def indexed_chunks(chunks: pd.DataFrame, spec: IndexSpec) -> pd.DataFrame:
    """The chunks an index version holds: the first `chunks_per_doc` of each document."""
    ordered = chunks.sort_values(["doc_id", "char_start"], kind="stable")
    if spec.chunks_per_doc > 0:
        ordered = ordered.groupby("doc_id", sort=False).head(spec.chunks_per_doc)
    return ordered.reset_index(drop=True)


def _sentence_score(query: set[str], sentence: str) -> tuple[int, float]:
    terms = set(index_terms(sentence))
    hit = len(query & terms)
    return hit, hit / (1 + len(terms))


def best_sentence(query_terms: set[str], text: str, need_number: bool = False) -> tuple[tuple[int, float], str] | None:
    """The sentence of `text` sharing most terms with the query (ties: the denser one)."""
    best = None
    for s, e in sentence_spans(text):
        sentence = text[s:e]
        if sentence.startswith("#") or (need_number and not re.search(r"\d", sentence)):
            continue
        if len(index_terms(sentence)) < MIN_SENTENCE_TERMS:  # titles, labels, list stubs
            continue
        score = _sentence_score(query_terms, sentence)
        if score[0] and (best is None or score > best[0]):
            best = (score, sentence)
    return best


def build_index(data_dir: str | Path, spec: IndexSpec, index_dir: str | Path) -> Path:
    """Build the demo index for `spec` over the data dir's chunks; atomic (the directory
    appears whole, replacing the previous version)."""

    ws = load_workspace(data_dir, None, 800, 100, 3)
    held = _chunk_texts(ws.corpus, indexed_chunks(ws.chunks, spec))
    retriever = bm25s.BM25()
    retriever.index([index_terms(t) or ["\x00"] for t in held["text"]], show_progress=False)
    target = Path(index_dir)
    info = {"format": DEMO_INDEX_FORMAT, "spec": asdict(spec), "chunks": len(held)}
    write_atomic_dir(target, {
        "bm25": lambda p: retriever.save(p, show_progress=False),
        "chunks.jsonl": lambda p: held[["chunk_id"]].to_json(p, orient="records", lines=True),
        "index.json": lambda p: p.write_text(json.dumps(info, indent=2)),
    })
    return target


def read_spec(index_dir: str | Path) -> IndexSpec:
    info_path = Path(index_dir) / "index.json"
    if not info_path.is_file():
        raise FileNotFoundError(f"{index_dir}: no demo index here; build it with "
                                "`ragspan demo-rag index --index NAME --version V`")
    info = json.loads(info_path.read_text(encoding="utf-8"))
    if info.get("format") != DEMO_INDEX_FORMAT:
        raise ValueError(f"{index_dir}: index format {info.get('format')!r}, expected {DEMO_INDEX_FORMAT!r}")
    return IndexSpec(**info["spec"])


def retrieve(index_dir: str | Path, chunk_table: pd.DataFrame, questions: list[str], spec: IndexSpec) -> list[list[str]]:
    """Ranked chunk ids per question (top_k of them)."""
    index_dir = Path(index_dir)
    retriever = bm25s.BM25.load(index_dir / "bm25", show_progress=False)
    ids = pd.read_json(index_dir / "chunks.jsonl", lines=True, dtype=False)["chunk_id"].tolist()
    texts = dict(zip(chunk_table["chunk_id"], chunk_table["text"]))
    pool = min(len(ids), max(spec.top_k, RERANK_POOL if spec.rerank else spec.top_k))
    docs, scores = retriever.retrieve([index_terms(q) or ["\x00"] for q in questions], k=pool,
                                      show_progress=False, n_threads=1)
    ranked: list[list[str]] = []
    for q, row_docs, row_scores in zip(questions, docs, scores):
        hits = [(ids[int(d)], float(s)) for d, s in zip(row_docs, row_scores) if s > 0]
        if spec.rerank:
            terms = set(index_terms(q))
            order = {cid: i for i, (cid, _) in enumerate(hits)}
            hits.sort(key=lambda h: ((best_sentence(terms, texts[h[0]]) or ((0, 0.0), ""))[0], -order[h[0]]),
                      reverse=True)
        ranked.append([cid for cid, _ in hits[: spec.top_k]])
    return ranked


def _swap_number(sentence: str) -> str | None:
    """The sentence with its first number changed (1 → 2, 30 → 40, 99.9 → 98.9)."""
    m = re.search(r"\d+(?:[.,]\d+)*", sentence)
    if not m:
        return None
    raw = m.group(0)
    digits = [i for i, ch in enumerate(raw) if ch.isdigit()]
    lead = digits[0]
    bumped = str((int(raw[lead]) + 1) % 10 or 2)
    return sentence[: m.start()] + raw[:lead] + bumped + raw[lead + 1:] + sentence[m.end():]


def demo_run(data_dir: str | Path, index_dir: str | Path) -> tuple[list[dict], dict[str, str]]:
    """Answer every question of the data dir with the index at `index_dir`.

    Returns (run records, {question_id: intended label})."""

    spec = read_spec(index_dir)
    ws = load_workspace(data_dir, None, 800, 100, 3)
    table = _chunk_texts(ws.corpus, ws.chunks)
    texts = dict(zip(table["chunk_id"], table["text"]))
    questions = ws.questions.sort_values("question_id", kind="stable")
    qtexts = questions["question"].astype(str).tolist()
    ranked = retrieve(index_dir, table, qtexts, spec)
    refs = questions["reference_answer"] if "reference_answer" in questions else [None] * len(questions)
    records, intended = [], {}
    for qid, question, ref, hits in zip(questions["question_id"], qtexts, refs, ranked):
        qid = str(qid)
        oracle = set(index_terms(question + (" " + ref if isinstance(ref, str) else "")))
        gold = max(((best_sentence(oracle, t), cid) for cid, t in texts.items()),
                   key=lambda x: x[0][0] if x[0] else (0, 0.0))
        gold_sentence, gold_chunk = gold[0][1] if gold[0] else "", gold[1]
        mode = behaviour(qid)
        answer, label = None, None
        if mode == "misread" and hits:
            top = best_sentence(set(index_terms(question)), texts[hits[0]], need_number=True)
            swapped = _swap_number(top[1]) if top else None
            if swapped:
                answer, label = swapped, "synthesis_error"
        if mode == "invent":
            answer, label = _INVENTED[_stable(qid + "/invent") % len(_INVENTED)], "hallucination"
        if answer is None:
            answer = gold_sentence
            label = ("correct" if gold_chunk in hits[: spec.context_k] else
                     "rank_failure" if gold_chunk in hits else "retrieval_miss")
        records.append({
            "question_id": qid, "answer": answer,
            "retrieved": [{"chunk_id": cid, "score": round(1.0 / (1 + r), 4)} for r, cid in enumerate(hits)],
            "context_k": spec.context_k,
        })
        intended[qid] = label
    return records, intended


def write_run(records: list[dict], out: str | Path) -> Path:
    """Write run records as JSONL, atomically."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    os.replace(tmp, out)
    return out


def default_index_dir(name: str) -> Path:

    return store_path("demo_indexes") / name


# ----- command line: `ragspan demo-rag …` and `python -m ragspan.tasks.tools.demo_rag …` -----

def run_command(args: argparse.Namespace) -> int:
    where = Path(args.index_dir) if args.index_dir else default_index_dir(args.index)
    if args.demo_command == "index":
        spec = spec_for(args.version, chunks_per_doc=args.chunks_per_doc, rerank=args.rerank,
                        top_k=args.top_k, context_k=args.context_k)
        build_index(args.data, spec, where)
        print(f"demo index {args.index!r} {spec.version}: {json.dumps(asdict(spec))} → {where}")
        return 0
    try:
        if not (where / "index.json").is_file():  # first use: build it rather than fail
            spec = spec_for(args.version or "v1")
            build_index(args.data, spec, where)
            print(f"demo index {args.index!r} did not exist: built it as {spec.version} → {where}", file=sys.stderr)
        records, intended = demo_run(args.data, where)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_run(records, args.out)
    counts = pd.Series(intended).value_counts().to_dict()
    print(f"{len(records)} answers → {args.out} (intended: {json.dumps(counts, sort_keys=True)})")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ragspan.tasks.tools.demo_rag", description=__doc__.split("\n")[0])
    add_arguments(p)
    return run_command(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
