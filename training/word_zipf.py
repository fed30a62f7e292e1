"""How tasks/judges/verifier/word_zipf.json (word rarity for the local judge) was made.

    .venv/bin/pip install -e '.[train]'                       # wordfreq==3.1.1
    .venv/bin/python -m training.word_zipf [--out PATH | --install]

The Zipf frequency (log10 of occurrences per billion words) of each Snowball stem, from
wordfreq's English list (its top 40,000 words; the frequencies of words sharing a stem are
summed). wordfreq is needed only here; its data is CC BY-SA 4.0, so the JSON ships with
attribution (docs and training/README.md). Default output: a temporary path,
compared with the committed file.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import unicodedata
from pathlib import Path

import wordfreq
from nltk.stem.snowball import SnowballStemmer

REPO = Path(__file__).resolve().parents[1]
INSTALLED = REPO / "tasks" / "judges" / "verifier" / "word_zipf.json"
TOP = 40000


def build() -> dict:
    stem = SnowballStemmer("english").stem
    agg: dict[str, float] = {}
    for w in wordfreq.top_n_list("en", TOP):
        low = unicodedata.normalize("NFKC", w).casefold().replace("’", "'").removesuffix("'s")
        if not low or not low[0].isalpha():
            continue
        s = stem(low)
        agg[s] = agg.get(s, 0.0) + 10 ** wordfreq.zipf_frequency(w, "en")
    out = {k: round(math.log10(v), 2) for k, v in sorted(agg.items(), key=lambda kv: -kv[1])}
    version = getattr(wordfreq, "__version__", None)
    if version is None:
        from importlib.metadata import version as _v

        version = _v("wordfreq")
    return {"source": f"wordfreq {version} en top-{TOP}, Snowball-stemmed, zipf", "zipf": out}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--install", action="store_true", help=f"write {INSTALLED.relative_to(REPO)}")
    args = ap.parse_args()
    doc = build()
    out = (
        INSTALLED
        if args.install
        else Path(args.out)
        if args.out
        else Path(tempfile.mkdtemp()) / "word_zipf.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"{len(doc['zipf'])} stems -> {out}")
    if not args.install and INSTALLED.exists():
        same = json.loads(INSTALLED.read_text(encoding="utf-8")) == doc
        print(f"identical to the committed {INSTALLED.relative_to(REPO)}: {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
