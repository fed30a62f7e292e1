"""The demo RAG's named index versions and its command-line arguments: standard library
only, so building the `ragspan` parser stays fast (the system itself is demo_rag.py)."""

from __future__ import annotations

import argparse

# Named versions: `ragspan demo-rag index --version v2` builds the better index. Explicit
# options override a preset; an unknown version name starts from IndexSpec's defaults.
PRESETS: dict[str, dict] = {
    "v1": {"chunks_per_doc": 2, "rerank": False},
    "v2": {"chunks_per_doc": 0, "rerank": True},
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="demo_command", required=True)
    ix = sub.add_parser("index", help="(re)build the demo BM25 index for a version")
    ix.add_argument("--data", default="data/sample", help="data directory (default: data/sample)")
    ix.add_argument("--index", default="demo", help="index name (default: demo)")
    ix.add_argument("--version", default="v1", help=f"version; presets: {', '.join(PRESETS)}")
    ix.add_argument("--chunks-per-doc", type=int, help="index the first N chunks per document (0 = all)")
    ix.add_argument("--rerank", action=argparse.BooleanOptionalAction, default=None,
                    help="reorder the top BM25 candidates by best-sentence overlap (default: the preset's)")
    ix.add_argument("--top-k", type=int, help="chunks retrieved per question (default: 5)")
    ix.add_argument("--context-k", type=int, help="of those, how many go into the context window (default: 2)")
    ix.add_argument("--index-dir", help="where the index lives (default: STATE/demo-index/NAME)")
    an = sub.add_parser("answer", help="answer the questions with the current index: a run file")
    an.add_argument("--data", default="data/sample", help="data directory (default: data/sample)")
    an.add_argument("--index", default="demo", help="index name (default: demo)")
    an.add_argument("--index-dir", help="where the index lives (default: STATE/demo-index/NAME)")
    an.add_argument("--version", default="", help="when the index does not exist yet, build it first as this "
                                                  "version (default v1); an existing index is used as it is")
    an.add_argument("--out", required=True, help="run file to write (JSONL)")
