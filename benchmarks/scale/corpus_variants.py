"""Corpus-change variants of a scale workspace: what an index rebuild brings.

    .venv/bin/python -m benchmarks.scale.corpus_variants WS     # adds WS/docs-changed and WS/rechunked

- `docs-changed/`: one sentence appended to a random 5 % of the documents (a sentence of
  another document, so a real one), each one's last chunk grown to cover it. The run
  file and questions are the same (symlinks): the answers and their retrieved lists are
  identical, as after a document update that the retriever's top 10 did not notice.
- `rechunked/`: every document cut anew — a chunk boundary in the middle of each old chunk
  (at a space), so no chunk keeps its text; chunk ids `DOC#rN`. Each retrieved item of the
  run points at the new chunk that holds the start of the old one (duplicates dropped,
  rank order kept): the same answers over a re-chunked index.

generate.py calls `write_corpus_variants` for every workspace it writes.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import sys
from pathlib import Path

DOCS_SHARE = 0.05


def _read(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _write(path: Path, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def _link(src: Path, dest: Path) -> None:
    if dest.is_symlink() or dest.exists():
        dest.unlink()
    os.symlink(src.resolve(), dest)


def _variant(ws: Path, name: str, docs: list[dict], chunks: list[dict]) -> Path:
    """WS/name with this corpus and chunk table, the questions linked, an empty runs/."""
    out = ws / name
    (out / "runs").mkdir(parents=True, exist_ok=True)
    _write(out / "corpus.jsonl", docs)
    _write(out / "chunks.jsonl", chunks)
    _link(ws / "questions.csv", out / "questions.csv")
    return out


def write_docs_changed(ws: Path, seed: int = 17, share: float = DOCS_SHARE) -> dict:
    docs, chunks = _read(ws / "corpus.jsonl"), _read(ws / "chunks.jsonl")
    rng = random.Random(seed)
    picked = rng.sample(range(len(docs)), max(1, round(share * len(docs))))
    last: dict[str, dict] = {}
    for c in chunks:
        if c["doc_id"] not in last or c["char_end"] > last[c["doc_id"]]["char_end"]:
            last[c["doc_id"]] = c
    for i in picked:
        donor = docs[rng.randrange(len(docs))]["text"]
        sentence = donor.split("\n\n")[0].split(". ")[0].rstrip(".") + "."
        docs[i] = {**docs[i], "text": docs[i]["text"] + " " + sentence}
        last[docs[i]["doc_id"]]["char_end"] = len(docs[i]["text"])
    out = _variant(ws, "docs-changed", docs, chunks)
    for run in (ws / "runs").glob("*.jsonl"):
        _link(run, out / "runs" / run.name)
    return {"documents_changed": len(picked), "chunks_changed": len(picked)}


def _cuts(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """New chunks: a boundary at a space in the middle of each old chunk."""
    mids = []
    for s, e in spans:
        k = text.find(" ", (s + e) // 2, e)
        if k > s:
            mids.append(k)
    bounds = [0, *mids, len(text)]
    out = []
    for a, b in itertools.pairwise(bounds):
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            out.append((a, b))
    return out


def write_rechunked(ws: Path) -> dict:
    docs, chunks = _read(ws / "corpus.jsonl"), _read(ws / "chunks.jsonl")
    by_doc: dict[str, list[dict]] = {}
    for c in chunks:
        by_doc.setdefault(c["doc_id"], []).append(c)
    new_chunks, holder = [], {}
    for d in docs:
        old = sorted(by_doc.get(d["doc_id"], []), key=lambda c: c["char_start"])
        cuts = _cuts(d["text"], [(c["char_start"], c["char_end"]) for c in old])
        ids = []
        for i, (s, e) in enumerate(cuts):
            ids.append((s, e, f"{d['doc_id']}#r{i}"))
            new_chunks.append({"chunk_id": f"{d['doc_id']}#r{i}", "doc_id": d["doc_id"], "char_start": s, "char_end": e})
        for c in old:  # the new chunk holding the old one's start (else the last one before it)
            holder[c["chunk_id"]] = next((cid for s, e, cid in reversed(ids) if s <= c["char_start"]), ids[0][2])
    out = _variant(ws, "rechunked", docs, new_chunks)
    for run in (ws / "runs").glob("*.jsonl"):
        records = _read(run)
        for r in records:
            seen, items = set(), []
            for item in r["retrieved"]:
                cid = holder[item["chunk_id"]]
                if cid not in seen:
                    seen.add(cid)
                    items.append({**item, "chunk_id": cid})
            r["retrieved"] = items
        _write(out / "runs" / run.name, records)
    return {"rechunked_chunks": len(new_chunks)}


def write_corpus_variants(ws: Path) -> dict:
    return {**write_docs_changed(ws), **write_rechunked(ws)}


if __name__ == "__main__":
    print(json.dumps(write_corpus_variants(Path(sys.argv[1]))))
