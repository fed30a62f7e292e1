"""Planted chunk boundaries: does ragspan name evidence a chunk boundary cuts (issue 30)?

    .venv/bin/python -m benchmarks.chunk_split.run            # ~540 cases x 5 variants, a few minutes
    .venv/bin/python -m benchmarks.chunk_split.run --limit 100
    .venv/bin/python -m benchmarks.chunk_split.run --claims answer   # paraphrased claims (ClapNQ answers)

With `--claims answer` the claims are ClapNQ's human-written answers (paraphrases), the
evidence the stretch from the first to the last sentence the annotators selected for it,
where one chunk holds that stretch.

Documents and one-sentence claims come from XQuAD (en) and ClapNQ (dev), read from
../shared/data (training/readers/qa.py; never copied into the repository). Each document is
cut at sentence boundaries (chunks of at most 400 characters), one claim per document: its
evidence sentence, which sits whole in one chunk (the "evidence chunk"). Each question
retrieves its evidence chunk and two chunks of other documents, all in the context window.
Five workspaces, each evaluated by the real CLI (`ragspan evaluate`, local judge):

- `base` — the chunking above: what every claim gets when nothing is cut.
- `split` — the evidence chunk cut in two at the space nearest the middle of the evidence;
  one part keeps the evidence chunk's rank (the first part for even cases, the second for
  odd ones), the other is retrieved for nobody. Expected: `chunk_split`, `split_at` = the cut.
- `nothing` — the evidence chunk cut at a space in the middle of another of its sentences;
  the part with the evidence keeps the rank. Expected: no flag, the base label.
- `edge` — the evidence chunk cut exactly at the evidence's start (or end, when the
  evidence opens the chunk): evidence whole in one chunk right next to a boundary.
  Expected: no flag, the base label.
- `overlap` — `split`, but the part that keeps the rank overlaps the other by the whole
  evidence (a chunker with enough overlap). Expected: no flag.

Figures: flag recall over split cases whose claim the base chunking labels `correct` (with
`split_at` exact), false flags over the unchanged claims (base, nothing, edge, overlap), labels
of nothing/edge claims equal to their base label, and what the split claims were called
before this check ("read in halves"). JSON in benchmarks/results/chunk-split.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

from training.readers.qa import Doc, Item, detok, load_clapnq, load_clapnq_abstractive, load_xquad

RAGSPAN = str(Path(sys.executable).parent / "ragspan")
VARIANTS = ("base", "split", "nothing", "edge", "overlap")
_BEFORE = re.compile(r"\(read in halves: (\w+)\)")


def cases(limit: int | None, claims: str = "sentence") -> list[tuple[Doc, Item, str]]:
    """(document, item, claim): one claim of at least 6 words per document. `claims`:
    `sentence` — the evidence sentence itself (XQuAD and ClapNQ); `answer` — ClapNQ's
    human-written answer (a paraphrase), its evidence the selected sentences' stretch."""
    if claims == "answer":
        return _answer_cases(limit)
    out = []
    for docs, items in (load_xquad(), load_clapnq()):
        by_doc = {d.doc_id: d for d in docs}
        taken: set[str] = set()
        for it in items:
            s, e = it.sent
            doc = by_doc[it.doc_id]
            text = doc.text[s:e]
            if it.doc_id in taken or len(text.split()) < 6:
                continue
            taken.add(it.doc_id)
            out.append((doc, it, detok(text) if it.source == "clapnq" else text))
    out.sort(key=lambda c: c[1].qid)
    return out[:limit] if limit else out


def _answer_cases(limit: int | None) -> list[tuple[Doc, Item, str]]:
    docs, items = load_clapnq()
    by_doc, by_id = {d.doc_id: d for d in docs}, {it.doc_id: it for it in items}
    out = []
    for r in load_clapnq_abstractive():
        doc = by_doc.get(r["doc_id"])
        gold = [g for g in r["gold"] if g[0] >= 0]
        if doc is None or not gold or r["doc_id"] not in by_id:
            continue
        s, e = min(g[0] for g in gold), max(g[1] for g in gold)  # the selected sentences, as one stretch
        if s < 0 or doc.chunk_of(s, e) is None or len(doc.text[s:e].split()) < 6:
            continue
        it = by_id[r["doc_id"]]
        it = Item(r["qid"], "clapnq", r["question"], doc.doc_id, it.title, (s, e), (s, e), None, None, None)
        out.append((doc, it, r["answer"]))
    out.sort(key=lambda c: c[1].qid)
    return out[:limit] if limit else out


def _space_near(text: str, lo: int, hi: int) -> int | None:
    """The offset of the space nearest the middle of text[lo:hi] (not at its ends)."""
    mid = (lo + hi) // 2
    spaces = [i for i in range(lo + 1, hi - 1) if text[i] == " "]
    return min(spaces, key=lambda i: abs(i - mid)) if spaces else None


def planted(doc: Doc, sent: tuple[int, int], variant: str, odd: bool) -> tuple[list[tuple[int, int]], int, int | None]:
    """(the document's chunks, index of the chunk that keeps the evidence chunk's rank, the
    planted cut inside the evidence or None) — None chunks when the variant does not apply."""
    chunks = list(doc.chunks)
    k = doc.chunk_of(*sent)
    assert k is not None
    c0, c1 = chunks[k]
    s, e = sent
    if variant == "base":
        return chunks, k, None
    if variant in ("split", "overlap"):
        p = _space_near(doc.text, s, e)
        if p is None:
            return [], k, None
        if variant == "split":
            return chunks[:k] + [(c0, p), (p, c1)] + chunks[k + 1:], k + (1 if odd else 0), p
        # the kept part holds part of the evidence; its neighbour starts before the evidence
        return chunks[:k] + [(c0, p), (s, c1)] + chunks[k + 1:], k, None
    if variant == "nothing":
        others = [(a, b) for a, b in _sentences(doc, c0, c1) if (b <= s or a >= e) and b - a > 30]
        if not others:
            return [], k, None
        a, b = others[0]
        p = _space_near(doc.text, a, b)
        if p is None:
            return [], k, None
        keep = k if s < p else k + 1
        return chunks[:k] + [(c0, p), (p, c1)] + chunks[k + 1:], keep, None
    # edge: a boundary right at the evidence (whitespace before it stays with the other part)
    if s > c0:
        return chunks[:k] + [(c0, s), (s, c1)] + chunks[k + 1:], k + 1, None
    if e < c1:
        return chunks[:k] + [(c0, e), (e, c1)] + chunks[k + 1:], k, None
    return [], k, None


def _sentences(doc: Doc, c0: int, c1: int) -> list[tuple[int, int]]:
    from ragspan.tasks.core.text import sentence_spans

    return [(c0 + a, c0 + b) for a, b in sentence_spans(doc.text[c0:c1])]


def workspace(root: Path, variant: str, all_cases: list[tuple[Doc, Item, str]]) -> dict[str, int | None]:
    """Write the variant's workspace; {question_id: planted cut} of the cases it holds."""
    root.mkdir(parents=True)
    (root / "runs").mkdir()
    corpus, chunk_rows, questions, runs, cut = [], [], [], [], {}
    layouts = {}
    for i, (doc, it, claim) in enumerate(all_cases):
        chunks, keep, p = planted(doc, it.sent, variant, bool(i % 2))
        if not chunks:
            chunks, keep = list(doc.chunks), -1  # the document stays; the case is not in this variant
        layouts[doc.doc_id] = (chunks, keep)
        corpus.append({"doc_id": doc.doc_id, "text": doc.text, "source": it.source})
        chunk_rows += [{"chunk_id": f"{doc.doc_id}::{j}", "doc_id": doc.doc_id, "char_start": a, "char_end": b}
                       for j, (a, b) in enumerate(chunks)]
        if keep >= 0:
            cut[it.qid] = p
    n = len(all_cases)
    for i, (doc, it, claim) in enumerate(all_cases):
        keep = layouts[doc.doc_id][1]
        if keep < 0:
            continue
        others = [all_cases[(i + d) % n][0].doc_id for d in (7, 13)]
        retrieved = [{"chunk_id": f"{o}::0", "score": 0.5} for o in others]
        retrieved.insert(i % 3, {"chunk_id": f"{doc.doc_id}::{keep}", "score": 0.9})
        questions.append({"question_id": it.qid, "question": it.question})
        runs.append({"question_id": it.qid, "answer": claim, "claims": [claim], "retrieved": retrieved,
                     "context_k": 3})
    _jsonl(root / "corpus.jsonl", corpus)
    _jsonl(root / "chunks.jsonl", chunk_rows)
    _jsonl(root / "questions.jsonl", questions)
    _jsonl(root / "runs" / "planted.jsonl", runs)
    return cut


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def evaluate(ws: Path, out: Path, home: Path) -> pd.DataFrame:
    env = {**os.environ, "RAGSPAN_HOME": str(home)}
    subprocess.run([RAGSPAN, "evaluate", "--data", str(ws), "--run", "planted", "--out", str(out), "--quiet"],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    return pd.read_parquet(out / "diagnoses.parquet")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=None, help="cases (default: all)")
    ap.add_argument("--work", help="where workspaces and state go (default: a temporary directory)")
    ap.add_argument("--claims", choices=["sentence", "answer"], default="sentence",
                    help="claims: the evidence sentence (default) or ClapNQ's human-written answer")
    ap.add_argument("--name", default=None, help="results: benchmarks/results/NAME.json "
                    "(default chunk-split, chunk-split-answers with --claims answer)")
    args = ap.parse_args()
    args.name = args.name or ("chunk-split" if args.claims == "sentence" else "chunk-split-answers")
    work = Path(args.work or tempfile.mkdtemp(prefix="ragspan-chunk-split-"))
    all_cases = cases(args.limit, args.claims)
    runs: dict[str, pd.DataFrame] = {}
    cuts: dict[str, dict[str, int | None]] = {}
    for v in VARIANTS:
        cuts[v] = workspace(work / v, v, all_cases)
        runs[v] = evaluate(work / v, work / f"out-{v}", work / "home").set_index("question_id")
    base = runs["base"]
    supported = set(base.index[base["label"] == "correct"])
    split = runs["split"].loc[[q for q in cuts["split"] if q in supported]]
    exact = sum(bool(f) and pd.notna(a) and int(a) == cuts["split"][q]
                for q, f, a in zip(split.index, split["chunk_split"], split["split_at"]))
    flagged = int(split["chunk_split"].sum())
    unchanged = pd.concat([runs[v].loc[list(cuts[v])] for v in ("base", "nothing", "edge", "overlap")])
    same = {v: int((runs[v].loc[list(cuts[v]), "label"] == base.loc[list(cuts[v]), "label"]).sum())
            for v in ("nothing", "edge")}
    before = Counter(_BEFORE.search(r).group(1) if _BEFORE.search(r) else lbl
                     for r, lbl, f in zip(split["reason"], split["label"], split["chunk_split"]) if f)
    result = {
        "cases": len(all_cases), "variants": {v: len(cuts[v]) for v in VARIANTS},
        "base_correct": len(supported),
        "split_supported_cases": len(split), "flagged": flagged, "split_at_exact": exact,
        "recall": round(flagged / len(split), 4) if len(split) else None,
        "recall_exact": round(exact / len(split), 4) if len(split) else None,
        "split_labels_after": dict(Counter(split.loc[split["chunk_split"], "label"])),
        "split_labels_read_in_halves": dict(before),
        "unflagged_split_labels": dict(Counter(split.loc[~split["chunk_split"], "label"])),
        "unchanged_claims": len(unchanged), "false_flags": int(unchanged["chunk_split"].sum()),
        "false_flag_rate": round(float(unchanged["chunk_split"].mean()), 4),
        "false_flags_by_variant": {v: int(runs[v].loc[list(cuts[v]), "chunk_split"].sum())
                                   for v in ("base", "nothing", "edge", "overlap")},
        "labels_unchanged": {v: f"{same[v]}/{len(cuts[v])}" for v in same},
        "command": "benchmarks/chunk_split/run.py" + (f" --limit {args.limit}" if args.limit else "")
                   + (" --claims answer" if args.claims == "answer" else ""),
    }
    out = REPO / "benchmarks" / "results" / f"{args.name}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    for k, v in result.items():
        print(f"{k:<30} {v}")
    print(f"written {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
