"""Answer spans (issue 21): how well the local judge marks the words of a claim that its
evidence does not support, against human and edit-derived gold.

    .venv/bin/python -m benchmarks.answer_spans.run [--json benchmarks/results/answer-spans.json]
                                                    [--no-summedits] [--scale WS]

Data (read at run time from RAGSPAN_BENCH_DATA, never copied into the repository):

- WiCE `non_supported_tokens_{train,dev}`: partially supported sub-claims, each token
  marked supported or not by people. A claim is judged against its evidence sentences
  joined by line breaks. Scored per word (precision / recall / F1 of unsupported words,
  punctuation skipped: a word counts as marked when any of its characters is) and per
  character (F1).
- SummEdits (six domains): each inconsistent summary is an edit of a verified seed
  summary; the gold is the summary's words a word-level diff against its seed marks as
  changed or inserted. The summary is split into claims as the local judge splits an
  answer, each judged against its document. Reported: the share of inconsistent
  summaries (with at least one changed word) in which a changed word is marked, word
  P/R/F1, and the share of consistent summaries with any mark (false alarms).

Methods, in one run:
- `baseline` — the issue's: every content word of the claim absent from its best 1–2
  sentence evidence window (whatever the verdict).
- `product` — `Verdict.marks` of the shipped local judge (tasks/judges/verifier/marks.py):
  what users get, including no marks where the verdict is `unsupported`.
Anything chosen (marks.py's thresholds) is chosen on WiCE train; dev is reported only.
"""

from __future__ import annotations

import argparse
import difflib
import glob
import json
import math
import re
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from ragspan.tasks.judges.local import split_claims
from ragspan.tasks.judges.verifier import PACKAGED_MODEL, Verifier, decide
from ragspan.tasks.judges.verifier.features import pair_features
from ragspan.tasks.judges.verifier.marks import claim_marks
from ragspan.tasks.judges.verifier.profiles import claim_profile, passage_profile
from ragspan.tasks.judges.verifier.tokens import tokens

from training.readers.claims import DATA, REPO
from training.readers.wice_words import Span, score, wice, wice_gold

SPLITS = ("train", "dev")


# ------------------------------------------------------------------------------ data
# WiCE's reader, its word gold and the word score are shared with training.answer_marks
# (training/readers/wice_words.py); SummEdits is read here only.
def summedits() -> list[dict]:
    out = []
    for path in sorted(glob.glob(str(DATA / "summedits" / "summedits_*.json"))):
        domain = Path(path).stem.removeprefix("summedits_")
        with open(path, encoding="utf-8") as f:
            out += [dict(r, domain=domain) for r in json.load(f)]
    return out


def summedits_gold(r: dict) -> list[tuple[Span, bool]]:
    """(summary span, changed) per whitespace word with a word character: a word-level
    diff against the seed summary (the dataset's loader notes: difflib on .split())."""
    summary = r["summary"]
    spans, pos = [], 0
    for w in summary.split():
        i = summary.index(w, pos)
        spans.append((i, i + len(w)))
        pos = i + len(w)
    changed = set()
    sm = difflib.SequenceMatcher(None, r["original_summary"].split(), summary.split(), autojunk=False)
    for tag, _i1, _i2, j1, j2 in sm.get_opcodes():
        if tag in ("replace", "insert"):
            changed.update(range(j1, j2))
    return [(s, k in changed) for k, s in enumerate(spans) if re.search(r"\w", summary[s[0]:s[1]])]


# ------------------------------------------------------------------------------ methods
def product_marks(verifier: Verifier, items: list[tuple[str, str]]) -> list[list[tuple[int, int, str]]]:
    """Verdict marks of the shipped judge for (claim, passage) pairs: (start, end, kind)."""
    rows = verifier.rows([(c, [p], "", False) for c, p in items])
    return [[(s, e, k) for s, e, k, _es, _ee in r[0][6]] for r in rows]


def baseline_marks(claim: str, passage: str) -> list[Span]:
    """The issue's baseline: every content word absent from the best evidence window."""
    prof = claim_profile(claim, "", False)
    if prof is None:
        return []
    r = pair_features(prof, passage)
    p = passage_profile(passage)
    window = frozenset(p.norms[r.window[0]:r.window[1]]) if r.window else frozenset()
    out = []
    for t in tokens(claim):
        if not t.info.is_stop and t.info.norm not in window:
            out.append((t.start, t.end))
    return out


# ------------------------------------------------------------------------------ runs
def run_wice(verifier: Verifier) -> tuple[dict, dict]:
    out: dict[str, dict] = {}
    timing = {}
    for split in SPLITS:
        rows = wice(split)
        items = [(r["claim"], "\n".join(r["evidence"])) for r in rows]
        golds = [wice_gold(r) for r in rows]
        t0 = time.perf_counter()
        prod = product_marks(verifier, items)
        timing[split] = (time.perf_counter() - t0, len(items))
        out[split] = {
            "n_claims": len(rows),
            "baseline": score((g, baseline_marks(c, p)) for g, (c, p) in zip(golds, items, strict=True)),
            "product": score((g, [(s, e) for s, e, _k in m]) for g, m in zip(golds, prod, strict=True)),
            "product_claims_marked": sum(1 for m in prod if m),
        }
    return out, timing


def run_summedits(verifier: Verifier, limit: int | None = None) -> dict:
    recs = [r for r in summedits() if not r["id"].endswith("_og")]
    if limit:
        recs = recs[:limit]
    items, owner = [], []
    for k, r in enumerate(recs):
        for c in split_claims(r["summary"]):
            items.append((c.text, r["doc"]))
            owner.append((k, c.start))
    marks = product_marks(verifier, items)
    pred: list[list[Span]] = [[] for _ in recs]
    base: list[list[Span]] = [[] for _ in recs]
    for (k, at), m, (c, doc) in zip(owner, marks, items, strict=True):
        pred[k] += [(at + s, at + e) for s, e, _ in m]
        base[k] += [(at + s, at + e) for s, e in baseline_marks(c, doc)]
    out: dict = {}
    for name, got in (("baseline", base), ("product", pred)):
        bad = [(summedits_gold(r), got[k]) for k, r in enumerate(recs) if r["label"] == 0]
        bad = [(g, p) for g, p in bad if any(b for _, b in g)]
        found = sum(1 for g, p in bad if score([(g, p)])["recall"] > 0)
        ok = [got[k] for k, r in enumerate(recs) if r["label"] == 1]
        out[name] = {**score(bad), "found_share": round(found / max(1, len(bad)), 3),
                     "consistent_marked_share": round(sum(1 for p in ok if p) / max(1, len(ok)), 3)}
    out["n_inconsistent_with_changed_words"] = sum(
        1 for r in recs if r["label"] == 0 and any(b for _, b in summedits_gold(r)))
    out["n_consistent"] = sum(1 for r in recs if r["label"] == 1)
    return out


# ------------------------------------------------------------------------------ cost
def micro(verifier: Verifier, reps: int = 5) -> dict[str, float]:
    """CPU µs per pair of claim_marks against the pair's features (WiCE dev pairs with a
    window, profiles and passages already cached, as in the judge)."""
    pairs = []
    for r in wice("dev"):
        claim, passage = r["claim"], "\n".join(r["evidence"])
        prof = claim_profile(claim, "", False)
        res = pair_features(prof, passage) if prof is not None else None
        if res is not None and res.window is not None:
            X = np.asarray([[res.features[c] for c in verifier._columns]], np.float64)
            d = decide(float(verifier.model.matrix(X)[0, 0]), res.features, verifier.rules)
            pairs.append((claim, prof, passage, res, d.conflicts))
    t0 = time.process_time()
    for _ in range(reps):
        for claim, prof, passage, res, conflicts in pairs:
            claim_marks(prof, res, conflicts)
    marks_us = (time.process_time() - t0) / (reps * len(pairs)) * 1e6
    t0 = time.process_time()
    for _ in range(reps):
        for _claim, prof, passage, _res, _c in pairs:
            pair_features(prof, passage)
    feats_us = (time.process_time() - t0) / (reps * len(pairs)) * 1e6
    return {"pairs": len(pairs), "marks_us_per_pair": round(marks_us, 1), "features_us_per_pair": round(feats_us, 1)}


def scale_share(ws: Path, verifier: Verifier, k: int = 3) -> dict[str, float]:
    """CPU time of marks against the judge's rows() without them, on a scale workspace
    (benchmarks/scale/generate.py): each answer's claims against its top-k retrieved chunks."""
    import csv
    from unittest import mock

    import ragspan.tasks.judges.verifier as verifier_module
    from ragspan.tasks.judges.verifier import profiles, unsupported_bound

    docs = {d["doc_id"]: d["text"] for d in map(json.loads, (ws / "corpus.jsonl").open(encoding="utf-8"))}
    chunks = {c["chunk_id"]: docs[c["doc_id"]][c["char_start"]:c["char_end"]]
              for c in map(json.loads, (ws / "chunks.jsonl").open(encoding="utf-8"))}
    with (ws / "questions.csv").open(encoding="utf-8") as f:
        questions = {r["question_id"]: r["question"] for r in csv.DictReader(f)}
    items = []
    for path in sorted((ws / "runs").glob("*.jsonl")):
        for a in map(json.loads, path.open(encoding="utf-8")):
            claims = split_claims(a["answer"])
            passages = [chunks[r["chunk_id"]] for r in a["retrieved"][:k]]
            items += [(c.text, passages, questions.get(a["question_id"], ""), len(claims) == 1) for c in claims]
    rows_cpu = math.inf
    with mock.patch.object(verifier_module, "claim_marks", lambda *a, **kw: ()):
        for _ in range(3):
            for cache in (profiles.passage_profile, profiles.passage_norms, profiles.claim_profile):
                cache.cache_clear()
            t0 = time.process_time()
            verifier.rows(items)
            rows_cpu = min(rows_cpu, time.process_time() - t0)
    pairs = []
    for claim, passages, question, whole in items:
        prof = claim_profile(claim, question, whole)
        for passage in passages if prof is not None else ():
            if unsupported_bound(prof, passage) >= verifier.model.bound:
                res = pair_features(prof, passage)
                if res.window is not None:
                    X = np.asarray([[res.features[c] for c in verifier._columns]], np.float64)
                    d = decide(float(verifier.model.matrix(X)[0, 0]), res.features, verifier.rules)
                    pairs.append((claim, question, whole, prof, passage, res, d.conflicts))
    marks_cpu = math.inf
    for _ in range(5):
        t0 = time.process_time()
        for claim, question, whole, prof, passage, res, conflicts in pairs:
            claim_marks(prof, res, conflicts)
        marks_cpu = min(marks_cpu, time.process_time() - t0)
    return {"claims": len(items), "segmented_pairs": len(pairs), "rows_cpu_s": round(rows_cpu, 3),
            "marks_cpu_s": round(marks_cpu, 3), "marks_share": round(marks_cpu / rows_cpu, 4)}


# ------------------------------------------------------------------------------ main
def table(res: dict) -> str:
    lines = [f"{'set':<16}{'method':<10}{'P':>7}{'R':>7}{'tok F1':>8}{'chr F1':>8}{'found':>8}{'false':>8}"]
    for key, block in res.items():
        if not isinstance(block, dict) or "product" not in block:
            continue
        for m in ("baseline", "product"):
            s = block[m]
            extra = f"{s['found_share']:>8.3f}{s['consistent_marked_share']:>8.3f}" if "found_share" in s else ""
            lines.append(f"{key:<16}{m:<10}{s['precision']:>7.3f}{s['recall']:>7.3f}{s['f1']:>8.3f}"
                         f"{s['char_f1']:>8.3f}{extra}")
    return "\n".join(lines)


def main(argv: list[str] | None = None, report: Callable[[str], None] = print) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path, default=REPO / "benchmarks" / "results" / "answer-spans.json")
    ap.add_argument("--no-summedits", action="store_true")
    ap.add_argument("--summedits-limit", type=int, default=None)
    ap.add_argument("--scale", type=Path, default=None,
                    help="a scale workspace (benchmarks/scale/generate.py --out WS): marks' share of the judge's CPU")
    args = ap.parse_args(argv)
    verifier = Verifier(PACKAGED_MODEL)
    res: dict = {}
    w, timing = run_wice(verifier)
    res.update({f"wice {k}": v for k, v in w.items()})
    if not args.no_summedits:
        res["summedits"] = run_summedits(verifier, args.summedits_limit)
    res["judge_seconds_per_claim_wice"] = {k: round(t / n, 5) for k, (t, n) in timing.items()}
    res["cost"] = micro(verifier)
    if args.scale:
        res["scale_cost"] = scale_share(args.scale, verifier)
    report(table(res))
    report(f"cost (WiCE dev, {res['cost']['pairs']} pairs): marks {res['cost']['marks_us_per_pair']} µs/pair, "
           f"the pair's features {res['cost']['features_us_per_pair']} µs/pair")
    if args.scale:
        c = res["scale_cost"]
        report(f"scale workspace ({c['claims']} claims, {c['segmented_pairs']} segmented pairs): marks "
               f"{c['marks_cpu_s']} s CPU against the judge's {c['rows_cpu_s']} s without them (+{c['marks_share']:.1%})")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
