"""Topical overlap is not support: a claim against the most similar *other* document.

    .venv/bin/python -m benchmarks.lodo.topical [--n 300]

From PubMedQA PQA-L (read at run time from the data directory, never copied): for each of
`n` abstracts (seeded), the longest sentence of its conclusion is judged by the packaged
local judge against (a) its own abstract's context and (b) the context of the most
similar other abstract among 600 (IDF-weighted shared words) — a scientific neighbour that
shares the topic and terminology but not the finding. (b) must not be supported; (a) is
reported for scale (conclusions paraphrase their results, so many are not word-for-word
supported).
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections import Counter

from ragspan.tasks.core.text import norm_set, sentence_spans
from ragspan.tasks.judges.base import JudgeSpec
from ragspan.tasks.judges.local import LocalJudge

from training.readers.claims import DATA


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args(argv)
    data = json.loads((DATA / "pubmedqa_labeled" / "ori_pqal.json").read_text(encoding="utf-8"))
    ids = sorted(data)
    random.Random(args.seed).shuffle(ids)
    ids = ids[:600]
    docs = {i: " ".join(data[i]["CONTEXTS"]) for i in ids}
    norms = {i: norm_set(docs[i]) for i in ids}
    df = Counter(w for i in ids for w in norms[i])

    def similarity(a: str, b: str) -> float:
        return sum(math.log(len(ids) / df[w]) for w in norms[a] & norms[b])

    judge = LocalJudge(JudgeSpec())
    own = neighbour = 0
    for i in ids[: args.n]:
        conclusion = data[i]["LONG_ANSWER"]
        claim = max((conclusion[s:e] for s, e in sentence_spans(conclusion)), key=len)
        other = max((x for x in ids if x != i), key=lambda x, i=i: similarity(i, x))
        own += getattr(judge.judge(claim, [docs[i]])[0], "verdict", "") == "supported"
        neighbour += getattr(judge.judge(claim, [docs[other]])[0], "verdict", "") == "supported"
    print(f"n={args.n}: conclusion sentence supported by its own abstract's context {own / args.n:.3f}; "
          f"by the most similar other abstract {neighbour / args.n:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
