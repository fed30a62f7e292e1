"""XQuAD (en) and ClapNQ (dev) as documents, chunks and one-sentence answers, from ../shared/data.

Shared by the benchmarks (accuracy, chunk_split, index_choice, scale.generate) and the LODO
sets (lodo_sets.py). The data is read-only and is never copied into the repository: they read it
from `RAGSPAN_BENCH_DATA` (default `<repo>/../shared/data`) and build their
workspaces in a temporary directory at run time.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ragspan.tasks.core.text import STOPWORDS, sentence_spans

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("RAGSPAN_BENCH_DATA", REPO.parent / "shared" / "data"))
XQUAD = DATA / "xquad_en" / "xquad.en.json"
CLAPNQ = DATA / "clapnq_dev"

# Chunking: a paragraph is cut at sentence boundaries (the project's own sentencex-based
# splitter) and sentences are packed greedily into chunks of at most CHUNK_CHARS
# characters (a single longer sentence is a chunk of its own). A sentence is therefore
# never split across chunks, so a one-sentence claim has exactly one gold chunk.
CHUNK_CHARS = 400


@dataclass
class Doc:
    doc_id: str
    text: str
    title: str
    source: str  # xquad | clapnq
    chunks: list[tuple[int, int]] = field(default_factory=list)

    def chunk_ids(self) -> list[str]:
        return [f"{self.doc_id}::{i}" for i in range(len(self.chunks))]

    def chunk_of(self, start: int, end: int) -> int | None:
        for i, (s, e) in enumerate(self.chunks):
            if s <= start and end <= e:
                return i
        return None


@dataclass
class Item:
    """One question with a one-sentence answer and its gold evidence."""

    qid: str
    source: str
    question: str
    doc_id: str
    title: str
    sent: tuple[int, int]  # the answer sentence in the doc
    gold: tuple[int, int]  # the gold span in the doc (answer span / selected sentence)
    swap: tuple[int, int] | None  # the swappable stretch (doc offsets), inside `sent`
    kind: str | None  # year | number | entity — what the swappable stretch is
    swap_text: str | None


def sentence_chunks(text: str, limit: int = CHUNK_CHARS) -> list[tuple[int, int]]:
    sents = list(sentence_spans(text)) or [(0, len(text))]
    out: list[tuple[int, int]] = []
    cur: tuple[int, int] | None = None
    for s, e in sents:
        if cur is None:
            cur = (s, e)
        elif e - cur[0] <= limit:
            cur = (cur[0], e)
        else:
            out.append(cur)
            cur = (s, e)
    if cur is not None:
        out.append(cur)
    return out


def detok(text: str) -> str:
    """Undo NQ tokenisation: "`` x ''" → '"x"', " ," → ",", "( x )" → "(x)"."""
    text = text.replace("`` ", '"').replace(" ''", '"')
    text = re.sub(r" ([,.;:!?)%])", r"\1", text)
    text = re.sub(r"\( ", "(", text)
    return re.sub(r" (['’]s)\b", r"\1", text)


_YEAR = re.compile(r"(1[0-9]|20)\d\d")
_HAS_DIGIT = re.compile(r"\d")


def answer_kind(text: str) -> str | None:
    t = text.strip().rstrip(".")
    if not t:
        return None
    if _YEAR.fullmatch(t):
        return "year"
    if _HAS_DIGIT.search(t):
        return "number"
    words = t.split()
    if t.lower() in STOPWORDS or words[0].lower() in STOPWORDS:
        return None  # "What", "The ..." are not names
    if (
        t[0].isupper()
        and len(words) <= 4
        and all(w[0].isupper() or w.lower() in {"of", "the", "de", "and"} for w in words)
    ):
        return "entity"
    return None


def _sentence_around(text: str, start: int, end: int) -> tuple[int, int]:
    spans = sentence_spans(text)
    first = next((s for s in spans if s[0] <= start < s[1] or start < s[0]), spans[-1])
    last = next((s for s in spans if s[0] < end <= s[1]), first)
    return first[0], max(first[1], last[1])


def load_xquad() -> tuple[list[Doc], list[Item]]:
    with open(XQUAD, encoding="utf-8") as f:
        d = json.load(f)
    docs, items = [], []
    for art in d["data"]:
        for i, p in enumerate(art["paragraphs"]):
            ctx = p["context"]
            doc = Doc(f"{art['title']}#{i}", ctx, art["title"], "xquad", sentence_chunks(ctx))
            docs.append(doc)
            for qa in p["qas"]:
                a = qa["answers"][0]
                gs, ge = a["answer_start"], a["answer_start"] + len(a["text"])
                assert ctx[gs:ge] == a["text"]
                sent = _sentence_around(ctx, gs, ge)
                if doc.chunk_of(*sent) is None:
                    continue
                kind = answer_kind(a["text"])
                # The swappable stretch is the answer without a trailing full stop.
                se = ge - (1 if a["text"].endswith(".") else 0)
                items.append(
                    Item(
                        qa["id"],
                        "xquad",
                        qa["question"],
                        doc.doc_id,
                        art["title"],
                        sent,
                        (gs, ge),
                        (gs, se) if kind else None,
                        kind,
                        ctx[gs:se] if kind else None,
                    )
                )
    return docs, items


_NUM_IN_TEXT = re.compile(r"(?<![\w.,])\d[\d,]*(?:\.\d+)?(?![\w])")
_CAPS_IN_TEXT = re.compile(r"(?<=[a-z,] )[A-Z][a-z]+(?: [A-Z][a-z]+){0,2}")


def load_clapnq() -> tuple[list[Doc], list[Item]]:
    """Answerable records → items (claim = the first selected sentence, gold span = it);
    unanswerable records → distractor documents only."""
    docs, items = [], []
    for name in ("clapnq_dev_answerable.jsonl", "clapnq_dev_unanswerable.jsonl"):
        for line in (CLAPNQ / name).read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            p = r["passages"][0]
            text = p["text"]
            doc = Doc(f"clapnq:{r['id']}", text, p["title"], "clapnq", sentence_chunks(text))
            docs.append(doc)
            if "unanswerable" in name:
                continue
            sents = [s for o in r["output"] if o["answer"] for s in o["selected_sentences"]]
            sents = [s for s in sents if len(s.split()) >= 6]
            if not sents:
                continue
            s = sents[0]
            start = text.find(s)
            if start < 0 or doc.chunk_of(start, start + len(s)) is None:
                continue
            sent = (start, start + len(s))
            swap = kind = None
            m = _NUM_IN_TEXT.search(s) or _CAPS_IN_TEXT.search(s)
            if m:
                kind = answer_kind(m.group(0))
                if kind:
                    swap = (start + m.start(), start + m.end())
            items.append(
                Item(
                    r["id"],
                    "clapnq",
                    r["input"],
                    doc.doc_id,
                    p["title"],
                    sent,
                    sent,
                    swap,
                    kind,
                    text[swap[0] : swap[1]] if swap else None,
                )
            )
    return docs, items


def load_clapnq_abstractive() -> list[dict]:
    """ClapNQ answerable records with their human-written (abstractive) answer and the
    offsets of its selected evidence sentences: a paraphrase probe, all claims gold-supported."""
    out = []
    for line in (CLAPNQ / "clapnq_dev_answerable.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        text = r["passages"][0]["text"]
        o = next((o for o in r["output"] if o["answer"].strip()), None)
        if o is None:
            continue
        gold = [
            (text.find(s), text.find(s) + len(s))
            for s in o["selected_sentences"]
            if text.find(s) >= 0
        ]
        out.append(
            {
                "qid": r["id"],
                "question": r["input"],
                "doc_id": f"clapnq:{r['id']}",
                "answer": o["answer"].strip(),
                "gold": gold,
            }
        )
    return out
