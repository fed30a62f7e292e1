"""bm25s vs tantivy for ragspan's corpus-wide search (tasks/steps/corpus_search.py).

    .venv/bin/python -m benchmarks.index_choice [--sizes 1000,100000] [--queries 1000] [--seed 13]

Both are project dependencies: tantivy is the corpus-wide search (tasks/steps/corpus_search.py),
bm25s the demo RAG's retriever (tasks/tools/demo_rag.py).

Corpora (built in a temporary directory at run time; the source data is never copied):
- the real chunks: XQuAD paragraphs and ClapNQ passages, cut as in training/readers/qa.py
  (sentences packed into ≤ 400-character chunks) — every XQuAD chunk is always kept;
- filler for the larger sizes: synthetic chunks of 2–4 sentences drawn at random from
  the XQuAD + ClapNQ sentence pool, excluding the query sentences (so only the real
  gold chunk holds a query's sentence; the filler still shares its words and topics).
Queries: the XQuAD answer sentences (the sentence of the context holding the gold answer,
as in benchmarks/accuracy.py); recall@5 = the gold paragraph is among the top-5 chunks.

Engines, each in its own child process (so memory is its own):
- `bm25s`: exactly what corpus_search does — ragspan's terms (tasks.corpus_search.index_terms:
  content-word Snowball stems, canonical numbers), saved, reloaded memory-mapped, queried
  with n_threads=1;
- `tantivy`: the same pre-computed terms through the whitespace tokenizer (like for like),
  one writer thread, BM25 OR-query of the terms;
- `tantivy-native`: tantivy's own `en_stem` analyzer on the raw text (no Python
  tokenisation at build time) and a lenient parsed query.
Reported: build time (indexing + saving; ragspan's term extraction is timed once, apart,
as both bm25s and tantivy-on-terms need it), query time for the queries (including the
query's term extraction), peak RSS growth during build, RSS growth of a fresh process
that loads the index and runs the queries, on-disk size, recall@5.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from training.readers.qa import REPO, load_clapnq, load_xquad

ENGINES = ("bm25s", "tantivy", "tantivy-native")


def _rss() -> int:
    return psutil.Process().memory_info().rss


class _PeakRSS:
    """Samples this process's RSS every 5 ms in a thread; `.peak` is the maximum seen."""

    def __enter__(self):
        import threading

        self.peak, self._stop = _rss(), False

        def poll():
            while not self._stop:
                self.peak = max(self.peak, _rss())
                time.sleep(0.005)

        self._t = threading.Thread(target=poll, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop = True
        self._t.join()
        self.peak = max(self.peak, _rss())


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def build_corpus(
    size: int, seed: int, n_queries: int
) -> tuple[list[str], list[str], list[str], list[str], list[str]]:
    """(chunk texts, chunk doc ids, query sentences, query gold doc ids, the XQuAD questions)."""
    rng = random.Random(seed)
    xdocs, xitems = load_xquad()
    cdocs, _ = load_clapnq()
    items = rng.sample(xitems, min(n_queries, len(xitems)))
    by_doc = {d.doc_id: d for d in xdocs}
    queries = [by_doc[i.doc_id].text[i.sent[0] : i.sent[1]] for i in items]
    gold = [i.doc_id for i in items]
    texts, ids = [], []
    for d in xdocs:
        for a, b in d.chunks:
            texts.append(d.text[a:b])
            ids.append(d.doc_id)
    real_c = [(d.text[a:b], d.doc_id) for d in cdocs for a, b in d.chunks]
    rng.shuffle(real_c)
    for t, i in real_c[: max(0, size - len(texts))]:
        texts.append(t)
        ids.append(i)
    if len(texts) < size:
        from ragspan.tasks.core.text import sentence_spans

        qset = set(queries)
        pool = [d.text[s:e] for d in xdocs + cdocs for s, e in sentence_spans(d.text)]
        pool = [s for s in pool if s not in qset]
        n = 0
        while len(texts) < size:
            texts.append(" ".join(rng.choice(pool) for _ in range(rng.randint(2, 4))))
            ids.append(f"syn:{n}")
            n += 1
    return texts[:size], ids[:size], queries, gold, [i.question for i in items]


# ---------------------------------------------------------------- child: one engine, one phase


def child_build(engine: str, work: Path) -> dict:
    data = pickle.loads((work / "corpus.pkl").read_bytes())
    rss0 = _rss()
    out = work / engine
    t0 = time.perf_counter()
    with _PeakRSS() as peak:
        _build(engine, data, out)
    secs = time.perf_counter() - t0
    return {
        "build_s": secs,
        "build_peak_mb": (peak.peak - rss0) / 2**20,
        "disk_mb": _du(out) / 2**20,
    }


def _build(engine: str, data: dict, out: Path) -> None:
    if engine == "bm25s":
        import bm25s

        r = bm25s.BM25()
        r.index(data["terms"], show_progress=False)
        r.save(out, show_progress=False)
    else:
        import tantivy

        sb = tantivy.SchemaBuilder()
        sb.add_integer_field("id", stored=False, fast=True)
        sb.add_text_field(
            "body",
            tokenizer_name="whitespace" if engine == "tantivy" else "en_stem",
            index_option="freq",
        )
        schema = sb.build()
        out.mkdir()
        ix = tantivy.Index(schema, path=str(out))
        w = ix.writer(100_000_000, 1)
        bodies = [" ".join(t) for t in data["terms"]] if engine == "tantivy" else data["texts"]
        for i, body in enumerate(bodies):
            w.add_document(tantivy.Document(id=i, body=body))
        w.commit()
        w.wait_merging_threads()


def child_query(engine: str, work: Path) -> dict:
    # Import ragspan (and with it Prefect) before the baseline RSS: the query memory
    # figure is the engine's, not the interpreter's.
    import ragspan.tasks.steps.corpus_search  # noqa: F401

    q = pickle.loads((work / "queries.pkl").read_bytes())
    rss0 = _rss()
    with _PeakRSS() as peak:
        out = _query(engine, work, q["queries"], q)
    # Recall only (not timed): the question itself as the query — a harder, retriever-like probe.
    harder = _query(engine, work, q["questions"], q)
    return {
        **out,
        "query_peak_mb": (peak.peak - rss0) / 2**20,
        "recall_at_5_question": harder["recall_at_5"],
    }


def _query(engine: str, work: Path, queries: list[str], q: dict) -> dict:
    from ragspan.tasks.steps.corpus_search import index_terms

    t0 = time.perf_counter()
    hits: list[list[int]] = []
    if engine == "bm25s":
        import bm25s

        r = bm25s.BM25.load(work / engine, mmap=True, show_progress=False)
        t_load = time.perf_counter() - t0
        t1 = time.perf_counter()
        terms = [index_terms(x) or ["\x00"] for x in queries]
        docs, _ = r.retrieve(terms, k=5, show_progress=False, n_threads=1)
        hits = [[int(d) for d in row] for row in docs]
    else:
        import tantivy

        ix = tantivy.Index.open(str(work / engine))
        ix.reload()
        searcher = ix.searcher()
        schema = ix.schema
        t_load = time.perf_counter() - t0
        t1 = time.perf_counter()
        for text in queries:
            if engine == "tantivy":
                terms = sorted(set(index_terms(text)))
                query = tantivy.Query.boolean_query(
                    [
                        (tantivy.Occur.Should, tantivy.Query.term_query(schema, "body", t))
                        for t in terms
                    ]
                )
            else:
                query, _errors = ix.parse_query_lenient(text, ["body"])
            res = searcher.search(query, 5, count=False)
            addrs = [a for _, a in res.hits]
            hits.append([int(v) for v in searcher.fast_field_values("id", addrs)] if addrs else [])
    secs = time.perf_counter() - t1
    gold_ids = q["doc_ids"]
    recall = sum(g in {gold_ids[h] for h in row} for g, row in zip(q["gold"], hits)) / len(hits)
    return {"load_s": t_load, "query_s": secs, "recall_at_5": recall}


# ---------------------------------------------------------------- parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,100000")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--json", default=str(REPO / "benchmarks" / "results" / "index_choice.json"))
    ap.add_argument("--child", nargs=3, metavar=("PHASE", "ENGINE", "WORK"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        phase, engine, work = args.child
        fn = child_build if phase == "build" else child_query
        print(json.dumps(fn(engine, Path(work))))
        return 0

    from ragspan.tasks.steps.corpus_search import index_terms

    t_all = time.perf_counter()
    results = {
        "seed": args.seed,
        "queries": args.queries,
        "python": sys.version.split()[0],
        "rows": [],
    }
    for size in [int(s) for s in args.sizes.split(",")]:
        work = Path(tempfile.mkdtemp(prefix=f"ragspan-index-{size}-"))
        try:
            texts, ids, queries, gold, questions = build_corpus(size, args.seed, args.queries)
            t0 = time.perf_counter()
            terms = [index_terms(t) for t in texts]
            t_terms = time.perf_counter() - t0
            (work / "corpus.pkl").write_bytes(pickle.dumps({"texts": texts, "terms": terms}))
            (work / "queries.pkl").write_bytes(
                pickle.dumps(
                    {"queries": queries, "gold": gold, "doc_ids": ids, "questions": questions}
                )
            )
            del terms
            print(
                f"\n{size} chunks ({sum(i.startswith('syn:') for i in ids)} synthetic), {len(queries)} queries; "
                f"ragspan term extraction {t_terms:.1f}s",
                flush=True,
            )
            for engine in args.engines.split(","):
                row = {
                    "chunks": size,
                    "engine": engine,
                    "terms_s": round(t_terms, 2) if engine != "tantivy-native" else 0.0,
                }
                for phase in ("build", "query"):
                    p = subprocess.run(
                        [sys.executable, "-m", "benchmarks.index_choice", "--child", phase, engine, str(work)],
                        check=False,
                        cwd=REPO,  # the repository root: `benchmarks` is a package there
                        capture_output=True,
                        text=True,
                        env={**os.environ, "RUST_BACKTRACE": "0"},
                    )
                    if p.returncode:
                        raise SystemExit(f"{engine} {phase} failed:\n{p.stderr[-2000:]}")
                    row.update(json.loads(p.stdout.strip().splitlines()[-1]))
                row = {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}
                results["rows"].append(row)
                print(
                    f"  {engine:<15} build {row['build_s']:6.2f}s  queries {row['query_s']:6.2f}s  "
                    f"recall@5 {row['recall_at_5']:.3f}  disk {row['disk_mb']:6.1f} MB",
                    flush=True,
                )
        finally:
            shutil.rmtree(work, ignore_errors=True)
    results["total_s"] = round(time.perf_counter() - t_all, 1)

    hdr = (
        f"{'chunks':>7} {'engine':<15} {'terms s':>8} {'build s':>8} {'load s':>7} {'1k q s':>7} "
        f"{'build MB':>9} {'query MB':>9} {'disk MB':>8} {'R@5':>6} {'R@5 q':>6}"
    )
    print("\n" + hdr)
    for r in results["rows"]:
        print(
            f"{r['chunks']:>7} {r['engine']:<15} {r['terms_s']:>8.2f} {r['build_s']:>8.2f} {r['load_s']:>7.2f} "
            f"{r['query_s'] * 1000 / args.queries:>7.2f} {r['build_peak_mb']:>9.1f} {r['query_peak_mb']:>9.1f} "
            f"{r['disk_mb']:>8.1f} {r['recall_at_5']:>6.3f} {r['recall_at_5_question']:>6.3f}"
        )
    print(
        f"(1k q s = seconds per 1,000 queries incl. term extraction; build MB = peak RSS growth while "
        f"indexing; query MB = peak RSS growth of a fresh process loading the index and running the queries; "
        f"R@5 = gold paragraph in the top 5 for the answer sentence, R@5 q = for the question)\n"
        f"total {results['total_s']:.0f}s"
    )
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    print(f"figures written to {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
