"""The bundled sample (data/sample/) is hand-edited data; these tests are its checks.

They check structure only: the files load, chunks are blank-line blocks of their
documents, every retrieved item and every expected label row points at something real,
the sample still exercises every label and every input form, and its README's numbers
are true. Whether the pipeline *produces* the expected labels is checked end to end by
tests/test_evaluate.py::test_sample_yields_every_label_and_the_expected_ones.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter, defaultdict
from itertools import pairwise

import pytest
from conftest import SAMPLE
from ragspan.tasks.inputs.load import load_workspace
from ragspan.tasks.judges.local import split_claims

try:  # the taxonomy module; older trees keep the labels in schemas
    from ragspan.tasks.core.taxonomy import LABELS
except ImportError:  # pragma: no cover
    from ragspan.tasks.core.schemas import LABELS

BLANK_LINES = re.compile(r"(?:\r?\n){2,}")
MIN_CHUNK = 300  # every chunk but a document's last has at least this many characters
CONTEXT_K = 3


def _jsonl(name: str) -> list[dict]:
    with open(SAMPLE / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _csv(name: str) -> list[dict]:
    with open(SAMPLE / name, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


DOCS = {d["doc_id"]: d for d in _jsonl("corpus.jsonl")}
TEXTS = {k: d["text"] for k, d in DOCS.items()}
CHUNKS = _jsonl("chunks.jsonl")
QUESTIONS = _csv("questions.csv")
RUN = _jsonl("runs/baseline.jsonl")
EXPECTED = _csv("expected_labels.csv")
CLAIMS: dict[str, list[str]] = defaultdict(list)  # question_id -> expected claims, in order
for _row in EXPECTED:
    CLAIMS[_row["question_id"]].append(_row["claim"])


def blocks(text: str) -> list[tuple[int, int]]:
    """(start, end) of every blank-line separated block, trailing newlines excluded."""
    spans, pos = [], 0
    for m in BLANK_LINES.finditer(text):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(text.rstrip("\r\n"))))
    return [(s, e) for s, e in spans if e > s]


def chunks_of(doc_id: str) -> list[dict]:
    return [c for c in CHUNKS if c["doc_id"] == doc_id]


@pytest.fixture(scope="module")
def workspace():
    return load_workspace(SAMPLE, "baseline", 800, 100, CONTEXT_K)


def test_the_project_loader_accepts_the_sample(workspace):
    assert len(workspace.corpus) == len(DOCS)
    assert set(workspace.chunks["chunk_id"]) >= {c["chunk_id"] for c in CHUNKS}
    assert list(workspace.questions["question_id"]) == [q["question_id"] for q in QUESTIONS]
    assert sorted(workspace.answers["question_id"]) == sorted(q["question_id"] for q in QUESTIONS)
    assert len(workspace.retrieved) == sum(len(r["retrieved"]) for r in RUN)


def test_every_taxonomy_label_is_expected_and_no_other():
    counts = Counter(r["label"] for r in EXPECTED)
    assert set(counts) == set(LABELS), f"missing {set(LABELS) - set(counts)}, unknown {set(counts) - set(LABELS)}"


def test_every_expected_row_is_a_claim_of_an_existing_answer():
    answers = {r["question_id"]: r["answer"] for r in RUN}
    questions = {q["question_id"] for q in QUESTIONS}
    assert len({(r["question_id"], r["claim"]) for r in EXPECTED}) == len(EXPECTED), "duplicate row"
    for r in EXPECTED:
        where = f"{r['question_id']}: {r['claim']!r}"
        assert r["question_id"] in questions and r["question_id"] in answers, where
        assert r["claim"] and r["claim"] == r["claim"].strip() and r["claim"] in answers[r["question_id"]], where
        assert r["source_conflict"] in ("true", "false"), where
        assert r["source_conflict"] == "false" or r["label"] == "correct", where
        assert r["chunk_split"] in ("true", "false"), where
        # a cut claim's evidence stands in the document: never a hallucination or a misreading
        assert r["chunk_split"] == "false" or r["label"] in ("correct", "rank_failure", "retrieval_miss"), where
    assert set(CLAIMS) == set(answers), "every answer has expected claims"


def test_each_answer_is_its_expected_claims_joined():
    for r in RUN:
        assert r["answer"] == " ".join(CLAIMS[r["question_id"]]), r["question_id"]


def test_the_local_judge_splits_each_answer_into_its_expected_claims():
    for r in RUN:
        if "claims" in r:  # bring-your-own claims are not split
            got = r["claims"]
        else:
            got = [c.text for c in split_claims(r["answer"])]
        assert got == CLAIMS[r["question_id"]], r["question_id"]


def test_a_source_conflict_needs_a_reference_answer():
    refs = {q["question_id"]: q["reference_answer"] for q in QUESTIONS}
    conflicts = [r for r in EXPECTED if r["source_conflict"] == "true"]
    assert conflicts
    assert all(refs[r["question_id"]].strip() for r in conflicts)


def test_questions_and_run_records_match_one_to_one():
    qids = [q["question_id"] for q in QUESTIONS]
    rids = [r["question_id"] for r in RUN]
    assert len(set(qids)) == len(qids) and len(set(rids)) == len(rids)
    assert sorted(qids) == sorted(rids)


def test_documents_have_consistent_line_endings_and_a_header_count():
    for doc_id, d in DOCS.items():
        text = d["text"]
        assert 600 <= len(text) <= 3000, (doc_id, len(text))
        if "\r" in text:  # CRLF throughout, no bare LF or CR
            assert text.count("\r\n") == text.count("\r") == text.count("\n"), doc_id
        header = text[slice(*blocks(text)[0])]
        assert d["header_lines"] == len(header.splitlines()), doc_id


def test_chunks_are_blank_line_blocks_covering_their_document():
    assert len({c["chunk_id"] for c in CHUNKS}) == len(CHUNKS)
    assert {c["doc_id"] for c in CHUNKS} == set(DOCS)
    for doc_id, text in TEXTS.items():
        bl = blocks(text)
        help_ = f"{doc_id}: its blank-line blocks are {bl}"
        cs = chunks_of(doc_id)
        assert [c["chunk_id"] for c in cs] == [f"{doc_id}#{n}" for n in range(len(cs))], help_
        starts, ends = [s for s, _ in bl], [e for _, e in bl]
        # the header block shares the first chunk with the first paragraph
        assert cs[0]["char_start"] == 0 and cs[0]["char_end"] >= bl[1][1], help_
        for c in cs:
            assert c["char_start"] in starts and c["char_end"] in ends, (c, help_)
        for a, b in pairwise(cs):  # consecutive blocks: nothing skipped, nothing shared
            assert starts.index(b["char_start"]) == ends.index(a["char_end"]) + 1, (a, b, help_)
        assert cs[-1]["char_end"] == ends[-1], help_
        for c in cs[:-1]:
            assert c["char_end"] - c["char_start"] >= MIN_CHUNK, (c, help_)


def test_every_retrieved_item_resolves_to_one_chunk_never_twice(workspace):
    ret = workspace.retrieved
    assert ret[["doc_id", "char_start", "char_end"]].notna().all().all()
    for qid, items in ret.groupby("question_id"):
        seen = []
        for d, s, e in zip(items["doc_id"], items["char_start"], items["char_end"]):
            assert 0 <= s < e <= len(TEXTS[d]), (qid, d, s, e)
            holders = [c["chunk_id"] for c in chunks_of(d) if c["char_start"] <= s and e <= c["char_end"]]
            assert len(holders) == 1, (qid, d, s, e, "lies across chunks")
            seen += holders
        assert len(seen) == len(set(seen)), (qid, "a chunk retrieved twice", seen)


def test_span_and_text_items_point_at_a_chunk_a_paragraph_or_unique_text():
    chunk_ids = {c["chunk_id"] for c in CHUNKS}
    for r in RUN:
        for item in r["retrieved"]:
            where = (r["question_id"], item)
            if "chunk_id" in item:
                assert item["chunk_id"] in chunk_ids, where
            elif "char_start" in item:
                span = (item["char_start"], item["char_end"])
                chunk_spans = {(c["char_start"], c["char_end"]) for c in chunks_of(item["doc_id"])}
                assert span in chunk_spans or span in blocks(TEXTS[item["doc_id"]]), where
            elif "doc_id" in item:
                assert TEXTS[item["doc_id"]].count(item["text"]) >= 1, where
            else:  # no doc_id: the text must name exactly one place in the corpus
                assert sum(t.count(item["text"]) for t in TEXTS.values()) == 1, where


def test_ranks_are_ordered_and_the_context_is_given_one_way():
    for r in RUN:
        items, qid = r["retrieved"], r["question_id"]
        assert 5 <= len(items) <= 6, qid
        scores = [i["score"] for i in items]
        assert all(a > b for a, b in pairwise(scores)), (qid, scores)
        flags = [i.get("in_context") for i in items]
        if any(f is not None for f in flags):  # per-item in_context replaces context_k
            assert all(isinstance(f, bool) for f in flags) and "context_k" not in r, qid
        else:
            assert r.get("context_k") == CONTEXT_K, qid


def test_the_sample_exercises_every_input_form():
    forms = Counter()
    for r in RUN:
        forms["claims"] += "claims" in r
        forms["in_context"] += any("in_context" in i for i in r["retrieved"])
        for i in r["retrieved"]:
            if "chunk_id" in i:
                forms["chunk_id"] += 1
            elif "char_start" in i:
                span, doc = (i["char_start"], i["char_end"]), i["doc_id"]
                exact = span in {(c["char_start"], c["char_end"]) for c in chunks_of(doc)}
                forms["span = chunk" if exact else "span in chunk"] += 1
            else:
                forms["text + doc_id" if "doc_id" in i else "text only"] += 1
    want = {"claims", "in_context", "chunk_id", "span = chunk", "span in chunk", "text + doc_id", "text only"}
    assert want <= {k for k, n in forms.items() if n}, forms
    assert any("\r\n" in t for t in TEXTS.values()), "a CRLF document"
    assert any(not t.isascii() for t in TEXTS.values()), "non-ASCII text"


def test_the_readme_numbers_are_the_data():
    readme = (SAMPLE / "README.md").read_text(encoding="utf-8")
    labels = Counter(r["label"] for r in EXPECTED)

    def stated(pattern: str) -> int:
        m = re.search(pattern, readme, re.MULTILINE)
        assert m, f"README.md no longer says {pattern!r}"
        return int(m.group(1))

    assert stated(r"\| (\d+) documents") == len(DOCS)
    assert stated(r"\| (\d+) chunks") == len(CHUNKS)
    assert stated(r"\| (\d+) questions") == len(QUESTIONS)
    assert stated(r"\((\d+) given\)") == sum(bool(q["reference_answer"]) for q in QUESTIONS)
    assert stated(r"\((\d+) claims\)") == len(EXPECTED)
    assert stated(r"(\d+) documents open with") == sum(d["header_lines"] >= 11 for d in DOCS.values())
    for label in LABELS:
        assert stated(rf"^\| {label} \| (\d+)") == labels[label], label
    assert stated(r"(\d+) of them with `source_conflict`") == sum(r["source_conflict"] == "true" for r in EXPECTED)
    assert stated(r"(\d+) of them with `chunk_split`") == sum(r["chunk_split"] == "true" for r in EXPECTED) >= 1
