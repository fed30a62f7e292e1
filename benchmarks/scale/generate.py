"""Synthetic but realistic ragspan workspaces for the scale benchmark.

    .venv/bin/python -m benchmarks.scale.generate --chunks 100000 --answers 10000 --out /tmp/ws
    .venv/bin/python -m benchmarks.scale.generate --chunks 10000000 --answers 10000 --format parquet --out /tmp/ws10m

Streamed: documents and chunk rows are written as they are made (tables.py: JSONL, or
`--format parquet` in row groups), the corpus kept only as each chunk's pool-sentence
indexes in one flat array (10M chunks: ~0.8 GB peak); a seed writes the same bytes as the
in-memory version did. `--variants` picks the corpus variants (default both).

Real sentences, recombined: the sentence pool is every sentence of the XQuAD paragraphs
and ClapNQ passages in `../shared/data` (read at run time, never copied into the repo;
`RAGSPAN_BENCH_DATA` overrides the folder) — or, when that folder is absent or with
`--source sample`, of the bundled data/sample corpus (a few hundred sentences: small
workspaces, as the tests build) — cut with ragspan's own sentence splitter and kept when
it is one clean sentence (40–300 characters, ≥ 6 words, ends in . ! ?).
10 % of the pool is held out of the corpus: the hallucinations are drawn from it.

- corpus: documents of 1–8 chunks; a chunk is 3–5 pool sentences joined by spaces
  (~520 characters), or with `--chunk-chars N` as many (at least 3) as bring it nearest N;
  chunks are separated by a blank line; `chunks.jsonl` gives their exact offsets.
  Metadata: `doc_type` (4 values) on documents, `topic` (8 values) on questions.
- run `runs/scale.jsonl`: one answer per question, 3–5 claims (mean 4), each claim a
  pool sentence whose label is known by construction; 10 retrieved chunks in rank
  order with decreasing scores, `context_k` 3:

  | label | share | construction |
  |---|---|---|
  | correct | 45 % | a sentence of a chunk retrieved at rank 1–3 |
  | rank_failure | 15 % | a sentence of a chunk at rank 4–10, not in ranks 1–3 |
  | retrieval_miss | 15 % | a sentence of a chunk that is not retrieved (nor any chunk holding it) |
  | synthesis_error | 12 % | a sentence with a number, of a chunk at rank 1–3, the number swapped for a 5-digit one |
  | hallucination | 13 % | a held-out sentence (in no chunk) |

  The other retrieved slots are random chunks holding none of the answer's sentences.
- `expected_labels.csv`: question_id, claim, label (the construction's label).
- `changed/`: the same corpus, chunks and questions (symlinks) and a run of the same
  name where a random 5 % of the answers are regenerated — for the changed re-run.
- `docs-changed/` and `rechunked/`: the same answers over a rebuilt index — 5 % of the
  documents with a sentence appended, and every document cut anew (corpus_variants.py).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import re
import time
from array import array
from pathlib import Path

from benchmarks.scale.tables import FORMATS, TableWriter, table_path

HERE = Path(__file__).resolve().parent
SAMPLE_CORPUS = HERE.parents[1] / "data" / "sample" / "corpus.jsonl"

LABEL_MIX = {"correct": 0.45, "rank_failure": 0.15, "retrieval_miss": 0.15, "synthesis_error": 0.12,
             "hallucination": 0.13}
DOC_TYPES = ("manual", "faq", "release-notes", "wiki")
TOPICS = ("storage", "compute", "network", "billing", "security", "database", "history", "science")
TOP_K, CONTEXT_K = 10, 3
_NUMBER = re.compile(r"(?<![\w.,$])\d{1,4}(?![\w.,%])")
_END = re.compile(r"[.!?]$")
_MARKUP = re.compile(r"[#|`*>]|^\s*[-\d]")  # data/sample's Markdown lines: headings, tables, code, lists
_FAQ = re.compile(r"^[QA]: ")


def _texts(source: str | None) -> list[str]:
    """The documents the pool is cut from: "shared" (XQuAD paragraphs and ClapNQ passages
    from ../shared/data), "sample" (the bundled data/sample corpus: a few hundred
    sentences, enough for a small workspace such as the tests'); default: shared when
    its data is there, else the sample."""
    from training.readers.qa import CLAPNQ, XQUAD, load_clapnq, load_xquad

    if source is None:
        source = "shared" if XQUAD.exists() and CLAPNQ.exists() else "sample"
    if source == "sample":
        with open(SAMPLE_CORPUS, encoding="utf-8") as f:
            docs = [json.loads(line)["text"] for line in f if line.strip()]
        # its Markdown's prose lines only (no heading, table, code or list), FAQ prefixes cut
        return ["\n".join(_FAQ.sub("", ln) for ln in d.splitlines() if not _MARKUP.search(ln)) for d in docs]
    xdocs, _ = load_xquad()
    cdocs, _ = load_clapnq()
    return [d.text for d in xdocs + cdocs]


def sentence_pool(source: str | None = None) -> list[str]:
    from ragspan.tasks.core.text import sentence_spans

    seen, pool = set(), []
    for text in _texts(source):
        for s, e in sentence_spans(text):
            t = " ".join(text[s:e].split())
            if (40 <= len(t) <= 300 and len(t.split()) >= 6 and _END.search(t) and ";" not in t
                    and t not in seen and len(sentence_spans(t)) == 1):
                seen.add(t)
                pool.append(t)
    return pool


def _sentences_near(chars: int, pool: list[str], rng: random.Random) -> list[int]:
    """Pool sentences (at least 3) drawn until the chunk is about `chars` characters long:
    one more is taken while it brings the length nearer (users' chunks: ~900 characters,
    issue 42 item 5; the default 3–5 sentences make ~520)."""
    sents = [rng.randrange(len(pool)) for _ in range(3)]
    size = sum(len(pool[s]) for s in sents) + 2
    while True:
        nxt = rng.randrange(len(pool))
        if size + (len(pool[nxt]) + 1) / 2 >= chars:
            return sents
        sents.append(nxt)
        size += len(pool[nxt]) + 1


class Corpus:
    """The chunks' pool sentences kept compact (one flat int array, offsets, each chunk's
    document): the documents and chunk rows are written as they are made, never held, so
    10M chunks fit (issue 34). The random draws are the ones the generator always made, so
    a seed gives the same workspace as before, byte for byte."""

    def __init__(self, n_chunks: int, pool: list[str], rng: random.Random, docs_out: TableWriter,
                 chunks_out: TableWriter, chunk_chars: int | None = None):
        self.flat = array("i")  # pool indexes of every chunk, one after the other
        self.offsets = array("q", [0])  # chunk c's sentences: flat[offsets[c]:offsets[c + 1]]
        self.chunk_doc = array("i")  # document index of each chunk
        self.doc_first = array("q")  # first chunk index of each document
        n, d = 0, 0
        while n < n_chunks:
            k = min(rng.randint(1, 8), n_chunks - n)
            doc_id, parts, pos = f"doc{d:06d}", [], 0
            self.doc_first.append(n)
            for i in range(k):
                sents = (_sentences_near(chunk_chars, pool, rng) if chunk_chars
                         else [rng.randrange(len(pool)) for _ in range(rng.randint(3, 5))])
                text = " ".join(pool[s] for s in sents)
                chunks_out.write({"chunk_id": f"{doc_id}#{i}", "doc_id": doc_id,
                                  "char_start": pos, "char_end": pos + len(text)})
                self.flat.extend(sents)
                self.offsets.append(len(self.flat))
                self.chunk_doc.append(d)
                parts.append(text)
                pos += len(text) + 2
                n += 1
            docs_out.write({"doc_id": doc_id, "text": "\n\n".join(parts), "doc_type": rng.choice(DOC_TYPES)})
            d += 1
        self.n_chunks, self.n_docs = n, d

    def sents(self, c: int) -> array:
        """Chunk c's pool sentences, in order."""
        return self.flat[self.offsets[c]:self.offsets[c + 1]]

    def chunk_id(self, c: int) -> str:
        d = self.chunk_doc[c]
        return f"doc{d:06d}#{c - self.doc_first[d]}"

    def index_of(self, chunk_id: str) -> int:
        doc, i = chunk_id.split("#")
        return self.doc_first[int(doc[3:])] + int(i)

    def held_by_any(self, s: int, chunks: set[int]) -> bool:
        """Whether one of `chunks` holds pool sentence s (a few chunks: no inverted index
        of the whole corpus needed)."""
        return any(s in self.sents(c) for c in chunks)


def _swap_number(sentence: str, rng: random.Random) -> str | None:
    nums = list(_NUMBER.finditer(sentence))
    if not nums:
        return None
    m = rng.choice(nums)
    new = str(rng.randint(10000, 99999))
    return sentence[: m.start()] + new + sentence[m.end():]


def make_answer(qid: str, corpus: Corpus, pool: list[str], held_out: list[int], rng: random.Random) -> tuple[dict, list[tuple[str, str]]]:
    n_chunks = corpus.n_chunks
    labels = rng.choices(list(LABEL_MIX), weights=list(LABEL_MIX.values()), k=rng.randint(3, 5))
    slots: list[int | None] = [None] * TOP_K  # chunk index per rank (0-based)
    claims: list[tuple[str, str]] = []
    own: set[int] = set()  # pool sentences the answer states (distractors must not hold them)
    for label in labels:
        for _ in range(50):  # a few tries to satisfy the construction
            if label == "hallucination":
                s = rng.choice(held_out)
                claims.append((pool[s], label))
                own.add(s)
                break
            in_ctx = label in ("correct", "synthesis_error")
            free = [r for r in (range(CONTEXT_K) if in_ctx else range(CONTEXT_K, TOP_K)) if slots[r] is None]
            used = [slots[r] for r in range(TOP_K) if slots[r] is not None]
            if label != "retrieval_miss" and used and rng.random() < 0.5:
                # reuse a chunk already placed in the right zone (answers lean on few chunks)
                zone = [slots[r] for r in (range(CONTEXT_K) if in_ctx else range(CONTEXT_K, TOP_K)) if slots[r] is not None]
                c = rng.choice(zone) if zone else rng.randrange(n_chunks)
            else:
                c = rng.randrange(n_chunks)
            if c not in slots and label != "retrieval_miss" and not free:
                continue
            if label == "synthesis_error":
                choices = [s for s in corpus.sents(c) if _NUMBER.search(pool[s])]
                if not choices:
                    continue
                s = rng.choice(choices)
                text = _swap_number(pool[s], rng)
            else:
                s = rng.choice(corpus.sents(c))
                text = pool[s]
            if s in own:
                continue
            ctx = {slots[r] for r in range(CONTEXT_K)} - {None}
            ret = set(slots) - {None}
            if label == "rank_failure" and corpus.held_by_any(s, ctx):
                continue
            if label == "retrieval_miss" and (corpus.held_by_any(s, ret) or c in ret):
                continue
            if c not in slots and label != "retrieval_miss":
                slots[rng.choice(free)] = c
            claims.append((text, label))
            own.add(s)
            break
    # distractors: random chunks holding none of the answer's sentences
    for r in range(TOP_K):
        while slots[r] is None:
            c = rng.randrange(n_chunks)
            if c not in slots and not (own & set(corpus.sents(c))):
                slots[r] = c
    score = round(rng.uniform(0.85, 0.95), 3)
    retrieved = []
    for c in slots:
        retrieved.append({"chunk_id": corpus.chunk_id(c), "score": score})
        score = round(score - rng.uniform(0.005, 0.03), 3)
    answer = " ".join(t for t, _ in claims)
    return {"question_id": qid, "answer": answer, "retrieved": retrieved, "context_k": CONTEXT_K}, claims


def _check_constraints(rec: dict, claims: list[tuple[str, str]], corpus: Corpus, pool_index: dict[str, int]) -> bool:
    """A later claim's chunk placement can break an earlier claim's construction (a chunk
    holding a rank_failure sentence landing in context): re-check all of them."""
    ranks = [corpus.index_of(r["chunk_id"]) for r in rec["retrieved"]]
    ctx, ret = set(ranks[:CONTEXT_K]), set(ranks)
    for text, label in claims:
        s = pool_index.get(text)
        if label == "rank_failure" and (s is None or corpus.held_by_any(s, ctx)):
            return False
        if label == "retrieval_miss" and (s is None or corpus.held_by_any(s, ret)):
            return False
    return True


def write_workspace(out: Path, n_chunks: int, n_answers: int, seed: int = 13, changed_share: float = 0.05,
                    source: str | None = None, fmt: str = "jsonl",
                    variants: tuple[str, ...] = ("docs-changed", "rechunked"), chunk_chars: int | None = None) -> dict:
    """The workspace in `out`, its corpus and chunks as `fmt` (jsonl or parquet); its
    sentences from `source` (see `_texts`); the corpus `variants` of corpus_variants.py;
    `chunk_chars`: chunks of about that many characters instead of 3–5 sentences."""
    t0 = time.perf_counter()
    rng = random.Random(seed)
    pool = sentence_pool(source)
    order = list(range(len(pool)))
    rng.shuffle(order)
    held_out = sorted(order[: len(pool) // 10])
    corpus_pool = [pool[i] for i in order[len(pool) // 10:]]
    held = [pool[i] for i in held_out]
    pool = corpus_pool + held  # corpus sentences first; held-out ones never enter a chunk
    held_idx = list(range(len(corpus_pool), len(pool)))
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(exist_ok=True)
    for stale in (p for f in FORMATS if f != fmt for p in (out / f"corpus.{f}", out / f"chunks.{f}")):
        stale.unlink(missing_ok=True)  # one form per table: the loader refuses two
    with TableWriter(out / f"corpus.{fmt}") as docs_out, TableWriter(out / f"chunks.{fmt}") as chunks_out:
        corpus = Corpus(n_chunks, corpus_pool, rng, docs_out, chunks_out, chunk_chars)
    pool_index = {t: i for i, t in enumerate(pool)}

    def answer(qid: str, r: random.Random) -> tuple[dict, list]:
        while True:
            rec, claims = make_answer(qid, corpus, pool, held_idx, r)
            if claims and _check_constraints(rec, claims, corpus, pool_index):
                return rec, claims

    records, expected = [], []
    with open(out / "questions.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["question_id", "question", "topic"])
        for i in range(n_answers):
            qid = f"q{i:05d}"
            rec, claims = answer(qid, rng)
            records.append(rec)
            expected.extend((qid, t, lab) for t, lab in claims)
            w.writerow([qid, "What about " + " ".join(claims[0][0].split()[:6]).rstrip(".,") + "?", rng.choice(TOPICS)])
    _write_run(out / "runs" / "scale.jsonl", records)
    with open(out / "expected_labels.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["question_id", "claim", "label"])
        w.writerows(expected)
    # the changed variant: same inputs but a random share of the answers regenerated
    ch = out / "changed"
    (ch / "runs").mkdir(parents=True, exist_ok=True)
    for name in (f"corpus.{fmt}", f"chunks.{fmt}", "questions.csv"):
        link = ch / name
        if not link.is_symlink():
            os.symlink(out / name, link)
    crng = random.Random(seed + 1)
    picked = set(crng.sample(range(n_answers), max(1, round(changed_share * n_answers))))
    changed = [answer(r["question_id"], crng)[0] if i in picked else r for i, r in enumerate(records)]
    _write_run(ch / "runs" / "scale.jsonl", changed)
    from benchmarks.scale.corpus_variants import write_corpus_variants

    made = write_corpus_variants(out, variants)  # docs-changed/ and rechunked/: an index rebuild
    info = {**made, "chunks": n_chunks, "chunk_chars": chunk_chars, "answers": n_answers, "claims": len(expected), "documents": corpus.n_docs,
            "pool_sentences": len(corpus_pool), "held_out_sentences": len(held), "seed": seed,
            "changed_answers": len(picked), "format": fmt,
            "corpus_mb": round(table_path(out, "corpus").stat().st_size / 2**20, 1),
            "generate_s": round(time.perf_counter() - t0, 2)}
    (out / "info.json").write_text(json.dumps(info, indent=2))
    return info


def _write_run(path: Path, records: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=1000)
    ap.add_argument("--answers", type=int, default=100)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--out", required=True, help="workspace directory (outside the repo, or gitignored)")
    ap.add_argument("--source", choices=["shared", "sample"], default=None,
                    help="sentences from ../shared/data (default when present) or the bundled data/sample")
    ap.add_argument("--format", choices=FORMATS, default="jsonl",
                    help="corpus and chunks as JSONL or Parquet (row groups, ParquetWriter)")
    ap.add_argument("--chunk-chars", type=int, default=None,
                    help="chunks of about this many characters (users' are ~900) instead of 3-5 sentences (~520)")
    ap.add_argument("--variants", default="docs-changed,rechunked",
                    help="comma-separated corpus variants to write (corpus_variants.py); '' for none")
    a = ap.parse_args()
    variants = tuple(v for v in a.variants.split(",") if v)
    print(json.dumps(write_workspace(Path(a.out), a.chunks, a.answers, a.seed, source=a.source, fmt=a.format,
                                     variants=variants, chunk_chars=a.chunk_chars)))


if __name__ == "__main__":
    main()
