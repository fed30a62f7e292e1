"""Accuracy of a ragspan judge on labelled runs built from XQuAD (en) and ClapNQ (dev).

    .venv/bin/python -m benchmarks.accuracy [--limit N] [--seed S] [--no-clapnq]
                                            [--variants byo,decomposed] [--judge local]

What it builds (in a temporary directory; the source data is never copied into the repo):

- corpus: one document per XQuAD paragraph (doc_id f"{title}#{i}") and per ClapNQ
  passage (doc_id f"clapnq:{id}", answerable and unanswerable records — the latter are
  distractors only); chunks: each document cut at sentence boundaries, sentences packed
  into chunks of ≤ 400 characters (training/readers/qa.py), so a sentence is never split.
- one question per item, its answer one full sentence: for XQuAD the context sentence
  containing the gold answer span (gold span = the answer span); for ClapNQ the first
  selected evidence sentence (gold span = that sentence). Half of the answers are
  verbatim, half lightly rephrased (parentheticals and a short leading clause that do
  not hold the answer dropped; NQ tokenisation undone for ClapNQ).
- each item gets one labelled case (classes balanced):
  `correct`         gold chunk at rank 1–3, inside the context window (context_k = 3);
  `rank_failure`    gold chunk at rank 4–6, retrieved but below the cutoff;
  `retrieval_miss`  gold chunk not retrieved; the corpus-wide search must find it;
  `synthesis_error` the answer's number/entity (XQuAD: the gold answer itself) swapped
                    for another question's answer of the same kind (year, integer,
                    other number, name), gold chunk in context;
  `hallucination`   swapped as above, and no chunk of the gold article retrieved.
  The other retrieved chunks are realistic distractors: the BM25 neighbours of the
  question over all chunks (same article included), minus the gold chunk — and for
  `hallucination` minus every chunk of the gold article/passage.
- two runs: `byo` (bring-your-own claims, one claim per answer: labels map 1:1 to gold)
  and `decomposed` (no claims: the judge's own segmentation; a decomposed piece that
  does not hold the swapped stretch is gold-labelled as its unswapped counterpart).

It runs the real evaluate flow in-process (fresh RAGSPAN_HOME, so no cache) and prints
per-label precision/recall/F1, macro-F1 over the five labels, the confusion matrix,
character IoU of the found span against the gold span for supported claims, and the
runtime; the figures go to benchmarks/results/accuracy-<judge>.json.

`--patch FILE` runs a Python file before the flow (e.g. one that monkeypatches the
local judge) to measure a candidate rule change without editing the package.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import runpy
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import bm25s
import pandas as pd
from ragspan.tasks.core.taxonomy import JUDGED_LABELS, SHORT, SUPPORTED_LABELS

from training.readers.qa import (
    REPO,
    Doc,
    Item,
    detok,
    load_clapnq,
    load_clapnq_abstractive,
    load_xquad,
)

LABELS = list(JUDGED_LABELS)
SUPPORTED = set(SUPPORTED_LABELS)
UNSWAPPED = {"synthesis_error": "correct", "hallucination": "retrieval_miss"}
N_RETRIEVED, CONTEXT_K = 6, 3
_WORD = re.compile(r"\w+")


# ---------------------------------------------------------------- building the cases


def fine_kind(item: Item) -> str | None:
    if item.kind == "number" and re.fullmatch(r"[\d,]+", item.swap_text or ""):
        return "int"
    return item.kind


def words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def pick_replacement(
    item: Item, doc: Doc, pool: dict[str, list[Item]], rng: random.Random
) -> str | None:
    """Another item's answer of the same kind, from another article, none of whose
    words occurs in the gold document (so the swapped claim is false by construction)."""
    cands = pool.get(fine_kind(item) or "", [])
    doc_words = words(doc.text)
    for _ in range(60):
        if not cands:
            return None
        other = rng.choice(cands)
        if other.title == item.title or other.swap_text == item.swap_text:
            continue
        w = words(other.swap_text)
        if w and not (w & doc_words):
            return other.swap_text
    return None


def claim_text(
    item: Item, doc: Doc, rephrase: bool, replacement: str | None
) -> tuple[str, str | None]:
    """The answer sentence (verbatim or lightly rephrased), with the swappable stretch
    replaced when `replacement` is given. Returns (claim, the swapped-in text)."""
    s, e = item.sent
    keep_out: list[tuple[int, int]] = []
    protect = item.swap or item.gold
    if rephrase:
        for m in re.finditer(r" ?\([^()]*\)", doc.text[s:e]):
            a, b = s + m.start(), s + m.end()
            if b <= protect[0] or a >= protect[1]:
                keep_out.append((a, b))
        m = re.match(r"[^,]{3,60}, ", doc.text[s:e])
        if (
            m
            and s + m.end() <= protect[0]
            and len(m.group(0).split()) <= 8
            and e - (s + m.end()) > 40
        ):
            keep_out.append((s, s + m.end()))
    pieces, pos = [], s
    for a, b in sorted(keep_out):
        if a < pos:
            continue
        pieces.append((pos, a))
        pos = b
    pieces.append((pos, e))
    out = []
    for a, b in pieces:
        if replacement is not None and item.swap and a <= item.swap[0] and item.swap[1] <= b:
            out.append(doc.text[a : item.swap[0]] + replacement + doc.text[item.swap[1] : b])
        else:
            out.append(doc.text[a:b])
    text = re.sub(r"\s+", " ", "".join(out)).strip()
    if rephrase and item.source == "clapnq":
        text = detok(text)
    if text and text[0].islower() and rephrase and keep_out and keep_out[0][0] == s:
        text = text[0].upper() + text[1:]
    return text, replacement


def build_cases(docs: list[Doc], items: list[Item], seed: int) -> list[dict]:
    rng = random.Random(seed)
    by_doc = {d.doc_id: d for d in docs}
    pool: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        if it.swap:
            pool[fine_kind(it)].append(it)
    # BM25 over every chunk, queried with the question: the simulated retriever.
    chunk_ids, chunk_docs, chunk_texts = [], [], []
    for d in docs:
        for cid, (a, b) in zip(d.chunk_ids(), d.chunks):
            chunk_ids.append(cid)
            chunk_docs.append(d)
            chunk_texts.append(d.text[a:b])
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(chunk_texts, stopwords="en", show_progress=False), show_progress=False
    )
    q_tokens = bm25s.tokenize([it.question for it in items], stopwords="en", show_progress=False)
    hits, _ = retriever.retrieve(q_tokens, k=40, show_progress=False, n_threads=1)

    counts = Counter({lab: 0 for lab in LABELS})
    cases = []
    order = list(range(len(items)))
    rng.shuffle(order)
    for n in order:
        it, doc = items[n], by_doc[items[n].doc_id]
        gold_chunk = f"{doc.doc_id}::{doc.chunk_of(*it.sent)}"
        replacement = pick_replacement(it, doc, pool, rng) if it.swap else None
        allowed = LABELS if replacement else LABELS[:3]
        low = min(counts[lab] for lab in allowed)
        label = rng.choice([lab for lab in allowed if counts[lab] == low])
        counts[label] += 1
        swapped = label in UNSWAPPED
        rephrase = rng.random() < 0.5
        claim, swapped_in = claim_text(it, doc, rephrase, replacement if swapped else None)
        if label == "hallucination":  # nothing from the gold article / passage
            banned = {
                i for i, d in enumerate(chunk_docs) if d.title == it.title or d.doc_id == doc.doc_id
            }
        else:
            banned = {chunk_ids.index(gold_chunk)}
        distractors = [chunk_ids[int(c)] for c in hits[n] if int(c) not in banned]
        if len(distractors) < N_RETRIEVED:
            extra = [c for c in rng.sample(range(len(chunk_ids)), 200) if c not in banned]
            distractors += [chunk_ids[c] for c in extra if chunk_ids[c] not in distractors]
        retrieved = distractors[
            : N_RETRIEVED - (1 if label in ("correct", "rank_failure", "synthesis_error") else 0)
        ]
        if label in ("correct", "synthesis_error"):
            retrieved.insert(rng.randrange(CONTEXT_K), gold_chunk)
        elif label == "rank_failure":
            retrieved.insert(rng.randrange(CONTEXT_K, N_RETRIEVED), gold_chunk)
        cases.append(
            {
                "question_id": f"{it.source}:{it.qid}",
                "source": it.source,
                "question": it.question,
                "label": label,
                "answer": claim,
                "swapped_in": swapped_in,
                "rephrased": rephrase,
                "kind": fine_kind(it) if swapped else None,
                "doc_id": doc.doc_id,
                "gold_start": it.gold[0],
                "gold_end": it.gold[1],
                "gold_text": doc.text[it.gold[0] : it.gold[1]] if it.source == "xquad" else None,
                "sent_start": it.sent[0],
                "sent_end": it.sent[1],
                "retrieved": retrieved,
                "gold_chunk": gold_chunk,
            }
        )
    return cases


def abstractive_cases(docs: list[Doc], seed: int, limit: int | None) -> list[dict]:
    """ClapNQ human answers, decomposed by the judge; every chunk of the gold passage in
    context (ranks 1..n) followed by two BM25-neighbour distractors: every claim is
    gold-`correct` (the annotators wrote it from that passage)."""
    recs = load_clapnq_abstractive()
    if limit is not None:
        recs = random.Random(seed).sample(recs, min(limit, len(recs)))
    by_doc = {d.doc_id: d for d in docs}
    chunk_ids = [cid for d in docs for cid in d.chunk_ids()]
    chunk_doc = [d.doc_id for d in docs for _ in d.chunks]
    chunk_texts = [d.text[a:b] for d in docs for a, b in d.chunks]
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(chunk_texts, stopwords="en", show_progress=False), show_progress=False
    )
    hits, _ = retriever.retrieve(
        bm25s.tokenize([r["question"] for r in recs], stopwords="en", show_progress=False),
        k=20,
        show_progress=False,
        n_threads=1,
    )
    out = []
    for r, row in zip(recs, hits):
        gold = by_doc[r["doc_id"]].chunk_ids()
        extra = [chunk_ids[int(c)] for c in row if chunk_doc[int(c)] != r["doc_id"]][:2]
        out.append(
            {
                **r,
                "question_id": f"abs:{r['qid']}",
                "retrieved": gold + extra,
                "context_k": len(gold),
            }
        )
    return out


def score_abstractive(cases: list[dict], diag: pd.DataFrame) -> dict:
    by_q = {c["question_id"]: c for c in cases}
    labels = Counter(diag["label"])
    in_gold = []
    for d in diag.to_dict("records"):
        c = by_q[d["question_id"]]
        ok = (
            d["doc_id"] == c["doc_id"]
            and pd.notna(d["char_start"])
            and any(iou((int(d["char_start"]), int(d["char_end"])), g) > 0 for g in c["gold"])
        )
        in_gold.append(bool(ok))
    n = len(diag)
    return {
        "claims": n,
        "answers": len(cases),
        "labels": dict(labels),
        "correct_share": round(labels.get("correct", 0) / n, 4) if n else None,
        "span_in_selected_sentences_share": round(sum(in_gold) / n, 4) if n else None,
    }


def write_workspace(
    root: Path, docs: list[Doc], cases: list[dict], abstractive: list[dict]
) -> None:
    (root / "runs").mkdir(parents=True)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as f:
        f.writelines(
            json.dumps({"doc_id": d.doc_id, "text": d.text, "title": d.title, "source": d.source})
            + "\n"
            for d in docs
        )
    with open(root / "chunks.jsonl", "w", encoding="utf-8") as f:
        for d in docs:
            f.writelines(
                json.dumps({"chunk_id": cid, "doc_id": d.doc_id, "char_start": a, "char_end": b})
                + "\n"
                for cid, (a, b) in zip(d.chunk_ids(), d.chunks)
            )
    pd.DataFrame(
        [
            {
                "question_id": c["question_id"],
                "question": c["question"],
                "source": c["source"],
                "case": c["label"],
            }
            for c in cases
        ]
        + [
            {
                "question_id": c["question_id"],
                "question": c["question"],
                "source": "clapnq",
                "case": "abstractive",
            }
            for c in abstractive
        ]
    ).to_csv(root / "questions.csv", index=False)
    with open(root / "runs" / "abstractive.jsonl", "w", encoding="utf-8") as f:
        f.writelines(
            json.dumps(
                {
                    "question_id": c["question_id"],
                    "answer": c["answer"],
                    "context_k": c["context_k"],
                    "retrieved": [{"chunk_id": cid} for cid in c["retrieved"]],
                },
                ensure_ascii=False,
            )
            + "\n"
            for c in abstractive
        )
    for variant in ("byo", "decomposed"):
        with open(root / "runs" / f"{variant}.jsonl", "w", encoding="utf-8") as f:
            for c in cases:
                rec = {
                    "question_id": c["question_id"],
                    "answer": c["answer"],
                    "context_k": CONTEXT_K,
                    "retrieved": [
                        {"chunk_id": cid, "score": round(1 - 0.05 * r, 3)}
                        for r, cid in enumerate(c["retrieved"])
                    ],
                }
                if variant == "byo":
                    rec["claims"] = [c["answer"]]
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")


# ---------------------------------------------------------------- scoring


def gold_label(case: dict, claim: dict) -> str:
    """The gold label of one (possibly decomposed) claim of a case."""
    if case["label"] not in UNSWAPPED:
        return case["label"]
    at = case["answer"].find(case["swapped_in"])
    s, e = claim["answer_start"], claim["answer_end"]
    if pd.isna(s) or at < 0 or (s <= at < e):
        return case["label"]
    return UNSWAPPED[case["label"]]


def iou(a: tuple[int, int], b: tuple[int, int]) -> float:
    inter = max(0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if union else 0.0


def score(cases: list[dict], diag: pd.DataFrame) -> dict:
    by_q = {c["question_id"]: c for c in cases}
    rows = []
    for d in diag.to_dict("records"):
        c = by_q[d["question_id"]]
        g = gold_label(c, d)
        row = {
            "question_id": d["question_id"],
            "source": c["source"],
            "gold": g,
            "pred": d["label"],
            "rephrased": c["rephrased"],
            "claim": d["claim"],
            "reason": d["reason"],
        }
        # Span figures: supported claims that state the gold fact (a decomposed piece of
        # the sentence that does not hold the XQuAD answer has no gold span to hit).
        holds = (
            c["gold_text"] is None
            or c["gold_text"].rstrip(".") in d["claim"]
            or not c["rephrased"]
            and d["claim"] == c["answer"]
        )
        if g in SUPPORTED and holds:
            same = d["doc_id"] == c["doc_id"] and pd.notna(d["char_start"])
            found = (int(d["char_start"]), int(d["char_end"])) if same else None
            gold = (c["gold_start"], c["gold_end"])
            row["iou"] = iou(found, gold) if found else 0.0
            row["iou_sentence"] = iou(found, (c["sent_start"], c["sent_end"])) if found else 0.0
            row["covers_gold"] = bool(found and found[0] <= gold[0] and gold[1] <= found[1])
        rows.append(row)
    df = pd.DataFrame(rows)
    return {
        "overall": metrics(df),
        **{f"source={s}": metrics(g) for s, g in df.groupby("source")},
        "_rows": df,
    }


def metrics(df: pd.DataFrame) -> dict:
    preds = LABELS + ["unjudged"]
    conf = pd.crosstab(df["gold"], df["pred"]).reindex(index=LABELS, columns=preds, fill_value=0)
    per = {}
    for lab in LABELS:
        tp = int(conf.loc[lab, lab])
        p_den, r_den = int(conf[lab].sum()), int(conf.loc[lab].sum())
        p = tp / p_den if p_den else 0.0
        r = tp / r_den if r_den else 0.0
        per[lab] = {
            "precision": round(p, 4),
            "recall": round(r, 4),
            "f1": round(2 * p * r / (p + r), 4) if p + r else 0.0,
            "support": r_den,
        }
    sup = df[df["gold"].isin(SUPPORTED) & df["iou"].notna()] if "iou" in df else df.iloc[0:0]
    ious = sup["iou"].tolist()
    return {
        "claims": len(df),
        "accuracy": round(float((df["gold"] == df["pred"]).mean()), 4) if len(df) else 0.0,
        "macro_f1": round(statistics.mean(v["f1"] for v in per.values()), 4),
        "per_label": per,
        "confusion": {g: {p: int(conf.loc[g, p]) for p in preds} for g in LABELS},
        "span": {
            "supported_claims": len(ious),
            "gold_span_found_share": round(sum(x > 0 for x in ious) / len(ious), 4)
            if ious
            else None,
            "gold_span_covered_share": round(float(sup["covers_gold"].mean()), 4) if ious else None,
            "iou_mean": round(statistics.mean(ious), 4) if ious else None,
            "iou_median": round(statistics.median(ious), 4) if ious else None,
            "iou_sentence_mean": round(float(sup["iou_sentence"].mean()), 4) if ious else None,
        },
    }


def print_report(name: str, m: dict, seconds: float) -> None:
    print(
        f"\n== {name}: {m['claims']} claims, accuracy {m['accuracy']:.3f}, macro-F1 {m['macro_f1']:.3f}, "
        f"pipeline {seconds:.1f}s"
    )
    print(f"{'label':<16}{'P':>7}{'R':>7}{'F1':>7}{'n':>6}")
    for lab, v in m["per_label"].items():
        print(f"{lab:<16}{v['precision']:>7.3f}{v['recall']:>7.3f}{v['f1']:>7.3f}{v['support']:>6}")
    preds = LABELS + ["unjudged"]
    short = SHORT
    print("confusion (rows gold, cols predicted)")
    print(f"{'':<16}" + "".join(f"{short[p]:>7}" for p in preds))
    for g in LABELS:
        print(f"{g:<16}" + "".join(f"{m['confusion'][g][p]:>7}" for p in preds))
    s = m["span"]
    if s["supported_claims"]:
        print(
            f"spans ({s['supported_claims']} supported claims): gold span found (IoU>0) {s['gold_span_found_share']:.3f}, "
            f"covered {s['gold_span_covered_share']:.3f}, IoU mean {s['iou_mean']:.3f} / median {s['iou_median']:.3f}, "
            f"IoU vs gold sentence mean {s['iou_sentence_mean']:.3f}"
        )


def run_flow(data: Path, run: str, out: Path, judge: str | None) -> tuple[pd.DataFrame, float]:
    from ragspan.flows.evaluate import evaluate

    t0 = time.perf_counter()
    evaluate(data_dir=str(data), run=run, out_dir=str(out), params_path=None, judge=judge)
    return pd.read_parquet(out / "diagnoses.parquet"), time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="number of items (questions) to sample")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--no-clapnq", action="store_true", help="XQuAD only")
    ap.add_argument("--variants", default="byo,decomposed")
    ap.add_argument("--skip", default="", help="'abstractive' to skip the ClapNQ paraphrase probe")
    ap.add_argument("--judge", default=None, help="judge kind (default: params.yaml, i.e. local)")
    ap.add_argument(
        "--patch", default=None, help="a Python file run before the flow (prototype rules)"
    )
    ap.add_argument(
        "--json",
        default=None,
        help="output JSON (default benchmarks/results/accuracy-<judge>.json)",
    )
    ap.add_argument("--failures", type=int, default=0, help="print this many misclassified claims")
    ap.add_argument("--keep", default=None, help="keep the workspace and outputs in this directory")
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    docs, items = load_xquad()
    if not args.no_clapnq:
        cdocs, citems = load_clapnq()
        docs, items = docs + cdocs, items + citems
    rng = random.Random(args.seed)
    if args.limit is not None and args.limit < len(items):
        items = rng.sample(items, args.limit)
    cases = build_cases(docs, items, args.seed)
    abstractive = [] if args.no_clapnq else abstractive_cases(docs, args.seed, args.limit)

    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="ragspan-bench-"))
    os.environ["RAGSPAN_HOME"] = str(tmp / "home")
    from ragspan.tasks.supervision.runtime import configure_prefect

    configure_prefect()
    if args.patch:
        runpy.run_path(args.patch, run_name="__patch__")
    write_workspace(tmp / "data", docs, cases, abstractive)
    t_built = time.perf_counter()
    print(
        f"built {len(cases)} cases over {len(docs)} documents "
        f"({sum(len(d.chunks) for d in docs)} chunks) in {t_built - t_start:.1f}s; workspace {tmp}"
    )
    print(
        "cases:",
        dict(Counter(c["label"] for c in cases)),
        "| sources:",
        dict(Counter(c["source"] for c in cases)),
    )

    result = {
        "seed": args.seed,
        "limit": args.limit,
        "clapnq": not args.no_clapnq,
        "judge": args.judge or "local",
        "patch": args.patch,
        "documents": len(docs),
        "chunks": sum(len(d.chunks) for d in docs),
        "cases": dict(Counter(c["label"] for c in cases)),
        "variants": {},
    }
    for variant in [v for v in args.variants.split(",") if v]:
        diag, secs = run_flow(tmp / "data", variant, tmp / "out" / variant, args.judge)
        scored = score(cases, diag)
        rows = scored.pop("_rows")
        for name, m in scored.items():
            print_report(f"{variant} / {name}", m, secs)
        result["variants"][variant] = {"pipeline_seconds": round(secs, 2), **scored}
        if args.failures:
            bad = rows[rows["gold"] != rows["pred"]]
            print(f"\n-- {len(bad)} misclassified ({variant}); first {args.failures}:")
            for r in bad.head(args.failures).to_dict("records"):
                print(
                    f"[{r['gold']} -> {r['pred']}] {r['question_id']}: {r['claim'][:160]}\n    {r['reason'][:200]}"
                )
            rows.to_csv(tmp / f"rows-{variant}.csv", index=False)
    if abstractive and "abstractive" not in args.skip:
        diag, secs = run_flow(tmp / "data", "abstractive", tmp / "out" / "abstractive", args.judge)
        probe = score_abstractive(abstractive, diag)
        result["abstractive_probe"] = {"pipeline_seconds": round(secs, 2), **probe}
        print(
            f"\n== abstractive probe (ClapNQ human answers, decomposed; all gold `correct`): {probe['claims']} claims "
            f"from {probe['answers']} answers, pipeline {secs:.1f}s\nlabels {probe['labels']}\n"
            f"correct share {probe['correct_share']:.3f}; evidence span inside a selected sentence "
            f"{probe['span_in_selected_sentences_share']:.3f}"
        )
    result["total_seconds"] = round(time.perf_counter() - t_start, 2)
    print(f"\ntotal runtime {result['total_seconds']:.1f}s")
    out = (
        Path(args.json)
        if args.json
        else REPO / "benchmarks" / "results" / f"accuracy-{result['judge']}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"figures written to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
