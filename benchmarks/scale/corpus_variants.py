"""Corpus-change variants of a scale workspace: what an index rebuild brings.

    .venv/bin/python -m benchmarks.scale.corpus_variants WS [docs-changed,rechunked]   # adds WS/docs-changed, WS/rechunked

- `docs-changed/`: one sentence appended to a random 5 % of the documents (a sentence of
  another document, so a real one), each one's last chunk grown to cover it. The run
  file and questions are the same (symlinks): the answers and their retrieved lists are
  identical, as after a document update that the retriever's top 10 did not notice.
- `rechunked/`: every document cut anew — a chunk boundary in the middle of each old chunk
  (at a space), so no chunk keeps its text; chunk ids `DOC#rN`. Each retrieved item of the
  run points at the new chunk that holds the start of the old one (duplicates dropped,
  rank order kept): the same answers over a re-chunked index.

generate.py calls `write_corpus_variants` for every workspace it writes. Both are streamed
(tables.py: JSONL or Parquet, as the workspace has them), so a 10M-chunk workspace's variants
are written without holding its corpus: only the changed documents' donor texts and, for
`rechunked/`, the new ids of the chunks the runs retrieve are kept.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import sys
from collections.abc import Iterator
from pathlib import Path

from benchmarks.scale.tables import TableWriter, count_rows, iter_rows, table_path

DOCS_SHARE = 0.05
VARIANTS = ("docs-changed", "rechunked")


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


def _variant_dir(ws: Path, name: str) -> Path:
    """WS/name with the questions linked and an empty runs/; its corpus and chunks are the caller's."""
    out = ws / name
    (out / "runs").mkdir(parents=True, exist_ok=True)
    for stale in (*out.glob("corpus.*"), *out.glob("chunks.*")):
        stale.unlink()  # a variant of the other format written before: the loader refuses two forms
    _link(ws / "questions.csv", out / "questions.csv")
    return out


def _by_document(chunks: Iterator[dict]) -> Iterator[tuple[str, list[dict]]]:
    """(doc_id, its chunk rows) in file order: the generator writes each document's chunks together."""
    for doc_id, rows in itertools.groupby(chunks, key=lambda c: c["doc_id"]):
        yield doc_id, list(rows)


def _docs_with_chunks(ws: Path) -> Iterator[tuple[dict, list[dict]]]:
    """Each document with its chunk rows, both files streamed side by side (same document order)."""
    groups = _by_document(iter_rows(table_path(ws, "chunks")))
    pending = next(groups, None)
    for doc in iter_rows(table_path(ws, "corpus")):
        if pending is not None and pending[0] == doc["doc_id"]:
            yield doc, pending[1]
            pending = next(groups, None)
        else:
            yield doc, []


def _donor_sentences(ws: Path, picked: list[int], donors: list[int]) -> dict[int, str]:
    """{picked document index: the sentence appended to it}: the first sentence of its donor
    document as the donor stands by then (itself grown if it was picked earlier), the draws
    in the order the in-memory version made them."""
    wanted = set(donors)
    texts = {i: d["text"] for i, d in enumerate(iter_rows(table_path(ws, "corpus"))) if i in wanted}
    appended: dict[int, str] = {}
    for i, donor in zip(picked, donors, strict=True):
        text = texts[donor] + (" " + appended[donor] if donor in appended else "")
        appended[i] = text.split("\n\n")[0].split(". ")[0].rstrip(".") + "."
    return appended


def write_docs_changed(ws: Path, seed: int = 17, share: float = DOCS_SHARE) -> dict:
    corpus = table_path(ws, "corpus")
    n_docs = count_rows(corpus)
    rng = random.Random(seed)
    picked = rng.sample(range(n_docs), max(1, round(share * n_docs)))
    donors = [rng.randrange(n_docs) for _ in picked]
    appended = _donor_sentences(ws, picked, donors)
    out = _variant_dir(ws, "docs-changed")
    fmt = corpus.suffix
    with TableWriter(out / f"corpus{fmt}") as docs_out, TableWriter(out / f"chunks{fmt}") as chunks_out:
        for i, (doc, chunks) in enumerate(_docs_with_chunks(ws)):
            if i in appended:
                doc = {**doc, "text": doc["text"] + " " + appended[i]}
                last = max(chunks, key=lambda c: c["char_end"])  # the first of the latest-ending
                chunks = [{**c, "char_end": len(doc["text"])} if c is last else c for c in chunks]
            docs_out.write(doc)
            for c in chunks:
                chunks_out.write(c)
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
    runs = {run.name: _read(run) for run in (ws / "runs").glob("*.jsonl")}
    retrieved = {item["chunk_id"] for records in runs.values() for r in records for item in r["retrieved"]}
    out = _variant_dir(ws, "rechunked")
    fmt = table_path(ws, "corpus").suffix
    holder: dict[str, str] = {}  # old chunk id -> the new one holding its start; retrieved chunks only
    n_new = 0
    with TableWriter(out / f"corpus{fmt}") as docs_out, TableWriter(out / f"chunks{fmt}") as chunks_out:
        for d, old in _docs_with_chunks(ws):
            old = sorted(old, key=lambda c: c["char_start"])
            cuts = _cuts(d["text"], [(c["char_start"], c["char_end"]) for c in old])
            ids = []
            for i, (s, e) in enumerate(cuts):
                ids.append((s, e, f"{d['doc_id']}#r{i}"))
                chunks_out.write({"chunk_id": f"{d['doc_id']}#r{i}", "doc_id": d["doc_id"], "char_start": s,
                                  "char_end": e})
            n_new += len(cuts)
            docs_out.write(d)
            for c in old:  # the new chunk holding the old one's start (else the last one before it)
                if c["chunk_id"] in retrieved:
                    holder[c["chunk_id"]] = next((cid for s, e, cid in reversed(ids) if s <= c["char_start"]), ids[0][2])
    for name, records in runs.items():
        for r in records:
            seen, items = set(), []
            for item in r["retrieved"]:
                cid = holder[item["chunk_id"]]
                if cid not in seen:
                    seen.add(cid)
                    items.append({**item, "chunk_id": cid})
            r["retrieved"] = items
        _write(out / "runs" / name, records)
    return {"rechunked_chunks": n_new}


def write_corpus_variants(ws: Path, variants: tuple[str, ...] = VARIANTS) -> dict:
    made: dict = {}
    if "docs-changed" in variants:
        made.update(write_docs_changed(ws))
    if "rechunked" in variants:
        made.update(write_rechunked(ws))
    return made


if __name__ == "__main__":
    print(json.dumps(write_corpus_variants(Path(sys.argv[1]), tuple(sys.argv[2].split(",")) if len(sys.argv) > 2
                                           else VARIANTS)))
