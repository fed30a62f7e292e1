"""Input loading and validation: every accepted form, and a clear error for each bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ragspan.tasks.core.schemas import Answers, Chunks, Corpus, Questions, Retrieved
from ragspan.tasks.inputs.load import (
    InputError,
    chunk_corpus,
    find_table,
    load_chunks,
    load_corpus,
    load_workspace,
    locate_text,
    read_table,
)
from ragspan.tasks.inputs.load.problems import _validate_schema

DOCS = [
    {
        "doc_id": "a",
        "text": "Paris is the capital of France.\r\nIt has 2 million people.",
        "source": "wiki",
    },
    {"doc_id": "b", "text": "The  Eiffel\ttower   was built in 1889.", "source": "blog"},
]
QUESTIONS = [
    {"question_id": "q1", "question": "Capital of France?", "reference_answer": "Paris"},
    {"question_id": "q2", "question": "When was the Eiffel tower built?"},
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_table(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        return write_jsonl(path, rows)
    df = pd.DataFrame(rows)
    if path.suffix == ".csv":
        # newline="" keeps the CRLF inside quoted fields byte for byte
        with open(path, "w", encoding="utf-8", newline="") as fh:
            df.to_csv(fh, index=False)
    else:
        df.to_parquet(path, index=False)
    return path


def make_data(
    tmp_path: Path, run: list[dict] | None = None, chunks: list[dict] | None = None
) -> Path:
    d = tmp_path / "data"
    write_jsonl(d / "corpus.jsonl", DOCS)
    write_jsonl(d / "questions.jsonl", QUESTIONS)
    if chunks is not None:
        write_jsonl(d / "chunks.jsonl", chunks)
    if run is not None:
        write_jsonl(d / "runs" / "r.jsonl", run)
    return d


def load(d: Path, run: str | None = "r", k: int = 1):
    return load_workspace(d, run, chunk_size=20, chunk_overlap=5, default_context_k=k)


# ----------------------------------------------------------------------------- good input


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_corpus_and_questions_every_format(tmp_path: Path, suffix: str) -> None:
    d = tmp_path / "data"
    write_table(d / f"corpus{suffix}", DOCS)
    write_table(d / f"questions{suffix}", QUESTIONS)
    ws = load(d, run=None)
    Corpus.validate(ws.corpus)
    Questions.validate(ws.questions)
    assert ws.corpus["doc_id"].tolist() == ["a", "b"]
    assert ws.corpus["text"].tolist() == [r["text"] for r in DOCS]  # CRLF kept
    assert ws.corpus["source"].tolist() == ["wiki", "blog"]
    assert ws.questions["reference_answer"].isna().tolist() == [False, True]
    assert set(ws.input_files) == {f"corpus{suffix}", f"questions{suffix}"}
    assert all(re.fullmatch(r"[0-9a-f]{32}", h) for h in ws.input_files.values())
    assert len(ws.answers) == 0 and list(ws.answers.columns) == [
        "run",
        "question_id",
        "question",
        "answer",
        "claims",
    ]
    Answers.validate(ws.answers)
    Retrieved.validate(ws.retrieved)


def test_bom_is_stripped(tmp_path: Path) -> None:
    d = make_data(tmp_path)
    (d / "corpus.csv").unlink(missing_ok=True)
    (d / "corpus.jsonl").unlink()
    (d / "corpus.csv").write_bytes(b"\xef\xbb\xbfdoc_id,text\nx,hello\n")
    corpus, _ = load_corpus(d)
    assert corpus.columns[0] == "doc_id" and corpus["text"].tolist() == ["hello"]


def test_folder_corpus(tmp_path: Path) -> None:
    d = tmp_path / "data"
    (d / "corpus" / "sub").mkdir(parents=True)
    (d / "corpus" / "one.txt").write_bytes(b"line one\r\nline two\r\n")
    (d / "corpus" / "sub" / "two.md").write_bytes("# Title\n\ncafé".encode())
    (d / "corpus" / "skip.pdf").write_bytes(b"%PDF")
    write_jsonl(d / "questions.jsonl", QUESTIONS)
    ws = load(d, run=None)
    assert ws.corpus["doc_id"].tolist() == ["one.txt", "sub/two.md"]
    assert ws.corpus["doc_type"].tolist() == ["txt", "md"]
    assert ws.corpus["text"].iloc[0] == "line one\r\nline two\r\n"
    assert set(ws.input_files) == {"corpus/one.txt", "corpus/sub/two.md", "questions.jsonl"}


def test_own_chunking_when_no_chunks_file(tmp_path: Path) -> None:
    ws = load(make_data(tmp_path), run=None)
    Chunks.validate(ws.chunks)
    assert ws.chunks["chunk_id"].iloc[0] == "a#0"
    texts = dict(zip(ws.corpus["doc_id"], ws.corpus["text"]))
    for doc_id, group in ws.chunks.groupby("doc_id"):
        covered = set()
        for s, e in zip(group["char_start"], group["char_end"]):
            covered.update(range(s, e))
        assert covered == set(range(len(texts[doc_id])))


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_chunks_file(tmp_path: Path, suffix: str) -> None:
    d = make_data(tmp_path)
    rows = [
        {
            "chunk_id": "c1",
            "doc_id": "a",
            "char_start": 0,
            "char_end": 31,
            "text": DOCS[0]["text"][:31],
        },
        {"chunk_id": "c2", "doc_id": "b", "char_start": 5, "char_end": 11, "text": "Eiffel"},
    ]
    write_table(d / f"chunks{suffix}", rows)
    corpus, _ = load_corpus(d)
    chunks = load_chunks(d, corpus, 20, 5)
    assert list(chunks.columns) == ["chunk_id", "doc_id", "char_start", "char_end"]
    assert chunks["char_start"].tolist() == [0, 5] and str(chunks["char_start"].dtype) == "int64"


def test_run_all_item_forms(tmp_path: Path) -> None:
    chunks = [{"chunk_id": "c1", "doc_id": "a", "char_start": 0, "char_end": 31}]
    run = [
        {
            "question_id": "q1",
            "answer": "Paris.",
            "retrieved": [
                {"chunk_id": "c1", "score": 0.9},
                {"doc_id": "b", "char_start": 5, "char_end": 11},
                {"doc_id": "a", "char_start": 0, "char_end": 31},  # same offsets as c1: reused
                {"text": "It has 2 million"},
                {"text": "Eiffel tower was\nbuilt", "doc_id": "b"},  # whitespace-normalised
            ],
        },
        {"question_id": "q2", "answer": "1889", "retrieved": [], "claims": ["Built in 1889."]},
    ]
    ws = load(make_data(tmp_path, run=run, chunks=chunks), k=2)
    r = ws.retrieved
    Retrieved.validate(r)
    assert r["rank"].tolist() == [1, 2, 3, 4, 5]
    assert r["chunk_id"].tolist()[:3] == ["c1", "b@5-11", "c1"]
    assert r["in_context"].tolist() == [True, True, False, False, False]
    assert r["score"].iloc[0] == 0.9 and r["score"].isna().sum() == 4
    texts = dict(zip(ws.corpus["doc_id"], ws.corpus["text"]))
    row = r.iloc[3]
    assert texts[row["doc_id"]][row["char_start"] : row["char_end"]] == "It has 2 million"
    row = r.iloc[4]
    assert texts["b"][row["char_start"] : row["char_end"]] == "Eiffel\ttower   was built"
    # ad-hoc chunks join the chunk table, so every retrieved chunk_id resolves
    assert set(r["chunk_id"]) <= set(ws.chunks["chunk_id"])
    Chunks.validate(ws.chunks)
    assert ws.answers["claims"].tolist() == [None, ["Built in 1889."]]
    assert set(ws.input_files) == {
        "corpus.jsonl",
        "chunks.jsonl",
        "questions.jsonl",
        "runs/r.jsonl",
    }


def test_in_context_per_item_and_context_k(tmp_path: Path) -> None:
    items = [{"doc_id": "a", "char_start": i, "char_end": i + 3} for i in range(4)]
    run = [
        {
            "question_id": "q1",
            "answer": "x",
            "retrieved": [
                {**it, "in_context": flag} for it, flag in zip(items, [False, True, False, True])
            ],
        },
        {"question_id": "q2", "answer": "y", "retrieved": items, "context_k": 3},
    ]
    ws = load(make_data(tmp_path, run=run), k=1)
    got = ws.retrieved.groupby("question_id")["in_context"].apply(list).to_dict()
    assert got == {"q1": [False, True, False, True], "q2": [True, True, True, False]}


def test_default_context_k(tmp_path: Path) -> None:
    items = [{"doc_id": "a", "char_start": i, "char_end": i + 3} for i in range(3)]
    run = [{"question_id": "q1", "answer": "x", "retrieved": items}]
    ws = load(make_data(tmp_path, run=run), k=2)
    assert ws.retrieved["in_context"].tolist() == [True, True, False]


def test_find_table_rejects_two_forms(tmp_path: Path) -> None:
    d = make_data(tmp_path)
    write_table(d / "corpus.csv", DOCS)
    with pytest.raises(InputError, match="corpus.jsonl and corpus.csv"):
        find_table(d, "corpus", required=True)


def test_read_table_row_numbers_skip_blank_lines(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"a": 1}\n\n{"a": 2}\n', encoding="utf-8")
    assert read_table(p).index.tolist() == [1, 3]


# ----------------------------------------------------------------------------- bad input

GOOD_CHUNK = {"chunk_id": "c1", "doc_id": "a", "char_start": 0, "char_end": 5}
GOOD_REC = {"question_id": "q1", "answer": "Paris", "retrieved": [{"chunk_id": "c1"}]}


def _bad_parquet_text(d: Path) -> None:
    (d / "corpus.jsonl").unlink()
    pd.DataFrame({"doc_id": ["a", "b"], "text": [DOCS[0]["text"], None]}).to_parquet(
        d / "corpus.parquet"
    )


def _bad_csv_text(d: Path) -> None:
    (d / "corpus.jsonl").unlink()
    (d / "corpus.csv").write_text("doc_id,text\na,hello\nb,\n", encoding="utf-8")


def _bad_utf8(d: Path) -> None:
    (d / "corpus.jsonl").write_bytes(
        json.dumps(DOCS[0]).encode() + b"\n" + b'{"doc_id": "b", "text": "caf\xe9"}\n'
    )


def _truncated(d: Path) -> None:
    (d / "questions.jsonl").write_text(
        json.dumps(QUESTIONS[0]) + '\n{"question_id": "q2", "quest', "utf-8"
    )


def _corpus(rows):  # replace the corpus
    return lambda d: write_jsonl(d / "corpus.jsonl", rows)


def _chunks(rows):
    return lambda d: write_jsonl(d / "chunks.jsonl", rows)


def _run(rows):
    return lambda d: write_jsonl(d / "runs" / "r.jsonl", rows)


# (mutation of a good data dir, file, row, field, message fragment)
BAD = {
    "missing column": (
        _corpus([{"doc_id": "a", "body": "x"}]),
        "corpus.jsonl",
        1,
        "text",
        "missing",
    ),
    "duplicate doc_id": (
        _corpus([DOCS[0], DOCS[1], {"doc_id": "a", "text": "z"}]),
        "corpus.jsonl",
        3,
        "doc_id",
        "duplicate doc_id 'a' (first at row 1)",
    ),
    "duplicate chunk_id": (
        _chunks([GOOD_CHUNK, GOOD_CHUNK]),
        "chunks.jsonl",
        2,
        "chunk_id",
        "duplicate",
    ),
    "unknown doc_id in chunks": (
        _chunks([GOOD_CHUNK, {**GOOD_CHUNK, "chunk_id": "c2", "doc_id": "x"}]),
        "chunks.jsonl",
        2,
        "doc_id",
        "unknown doc_id 'x'",
    ),
    "offsets out of range": (
        _chunks([{**GOOD_CHUNK, "char_end": 500}]),
        "chunks.jsonl",
        1,
        "char_end",
        "out of range: document 'a' has 57 characters",
    ),
    "reversed offsets": (
        _chunks([{**GOOD_CHUNK, "char_start": 9, "char_end": 3}]),
        "chunks.jsonl",
        1,
        "char_end",
        "must be greater than char_start",
    ),
    "chunk text mismatch": (
        _chunks([{**GOOD_CHUNK, "text": "Pariz"}]),
        "chunks.jsonl",
        1,
        "text",
        "chunk text does not match the document at [0, 5)",
    ),
    "char_start not an int": (
        _chunks([GOOD_CHUNK, {**GOOD_CHUNK, "chunk_id": "c2", "char_start": "abc"}]),
        "chunks.jsonl",
        2,
        "char_start",
        "expected an integer, got str 'abc'",
    ),
    "char_start fractional": (
        _chunks([{**GOOD_CHUNK, "char_start": 1.5}]),
        "chunks.jsonl",
        1,
        "char_start",
        "expected an integer, got float 1.5",
    ),
    "NaN text parquet": (_bad_parquet_text, "corpus.parquet", 2, "text", "expected a string"),
    "empty text csv": (_bad_csv_text, "corpus.csv", 2, "text", "empty string"),
    "non-UTF-8 corpus": (
        _bad_utf8,
        "corpus.jsonl",
        2,
        None,
        "not valid UTF-8: byte 0xe9 at line 2",
    ),
    "truncated JSONL line": (_truncated, "questions.jsonl", 2, None, "not valid JSON"),
    "duplicate question in run": (
        _run([GOOD_REC, {**GOOD_REC}]),
        "runs/r.jsonl",
        2,
        "question_id",
        "duplicate question_id 'q1' (first at row 1)",
    ),
    "unknown question in run": (
        _run([{**GOOD_REC, "question_id": "q9"}]),
        "runs/r.jsonl",
        1,
        "question_id",
        "unknown question_id 'q9'",
    ),
    "unknown chunk_id": (
        _run(
            [
                GOOD_REC,
                {
                    **GOOD_REC,
                    "question_id": "q2",
                    "retrieved": [{"chunk_id": "c1"}, {"chunk_id": "zz"}],
                },
            ]
        ),
        "runs/r.jsonl",
        2,
        "retrieved[1].chunk_id",
        "unknown chunk_id 'zz' (rank 2)",
    ),
    "empty answer": (
        _run([{**GOOD_REC, "answer": ""}]),
        "runs/r.jsonl",
        1,
        "answer",
        "empty string",
    ),
    "whitespace-only answer": (
        _run([{**GOOD_REC, "answer": " \n\t"}]),
        "runs/r.jsonl",
        1,
        "answer",
        "whitespace-only",
    ),
    "answer is a number": (
        _run([{**GOOD_REC, "answer": 42}]),
        "runs/r.jsonl",
        1,
        "answer",
        "expected a string, got int 42",
    ),
    "retrieved text not found": (
        _run([{**GOOD_REC, "retrieved": [{"text": "Berlin is lovely"}]}]),
        "runs/r.jsonl",
        1,
        "retrieved[0].text",
        "retrieved text not found in the corpus",
    ),
    "unknown key in item": (
        _run([{**GOOD_REC, "retrieved": [{"chunk_id": "c1", "scroe": 1}]}]),
        "runs/r.jsonl",
        1,
        "retrieved[0].scroe",
        "unknown key",
    ),
    "unknown key in record": (
        _run([{"question_id": "q1", "answer": "x", "retreived": []}]),
        "runs/r.jsonl",
        1,
        "retreived",
        "unknown key",
    ),
    "in_context on some items only": (
        _run(
            [
                {
                    **GOOD_REC,
                    "retrieved": [{"chunk_id": "c1", "in_context": True}, {"chunk_id": "c1"}],
                }
            ]
        ),
        "runs/r.jsonl",
        1,
        "retrieved[1].in_context",
        "all must",
    ),
    "item offsets out of range": (
        _run([{**GOOD_REC, "retrieved": [{"doc_id": "b", "char_start": 0, "char_end": 99}]}]),
        "runs/r.jsonl",
        1,
        "retrieved[0].char_end",
        "out of range",
    ),
    "bad claims": (
        _run([{**GOOD_REC, "claims": ["ok", ""]}]),
        "runs/r.jsonl",
        1,
        "claims[1]",
        "non-empty string",
    ),
}


@pytest.mark.parametrize("mutate,file,row,field,fragment", list(BAD.values()), ids=list(BAD))
def test_bad_input(tmp_path: Path, mutate, file, row, field, fragment) -> None:
    d = make_data(tmp_path, run=[GOOD_REC], chunks=[GOOD_CHUNK])
    mutate(d)
    with pytest.raises(InputError) as info:
        load(d)
    err = info.value
    assert Path(err.file) == d / file
    assert err.row == row and err.field == field
    msg = str(err)
    assert msg.startswith(f"{d / file}: ")
    if row is not None:
        assert f"row {row}" in msg
    if field is not None:
        assert f"field '{field}'" in msg
    assert fragment in msg


def test_first_problem_in_file_order(tmp_path: Path) -> None:
    # row 2 has a bad doc_id type; row 3 a bad text and a duplicate: row 2 is reported.
    rows = [DOCS[0], {"doc_id": 7, "text": "x"}, {"doc_id": "a", "text": None}]
    d = make_data(tmp_path)
    write_jsonl(d / "corpus.jsonl", rows)
    with pytest.raises(InputError) as info:
        load(d, run=None)
    assert (info.value.row, info.value.field) == (2, "doc_id")
    assert "expected a string, got int 7" in str(info.value)


def test_missing_run_file_says_jsonl(tmp_path: Path) -> None:
    d = make_data(tmp_path)
    (d / "runs").mkdir()
    (d / "runs" / "r.csv").write_text("question_id\n", "utf-8")
    with pytest.raises(InputError, match=r"runs/<run>.jsonl.*found r.csv"):
        load(d)


def test_input_error_format() -> None:
    assert str(InputError("f.csv", 3, "x", "bad")) == "f.csv: row 3, field 'x': bad"
    assert str(InputError("f.csv", None, "x", "bad")) == "f.csv: field 'x': bad"
    assert str(InputError("f.csv", None, None, "bad")) == "f.csv: bad"


# ----------------------------------------------------------------------------- properties

# Characters that break naive offset handling: combining marks, ZWJ emoji, CJK, RTL,
# CRLF and other whitespace (NBSP, ideographic space), astral code points.
TRICKY = st.sampled_from(
    [
        "e\u0301",
        "👩\u200d👩\u200d👧",
        "漢字",
        "שלום",
        "مرحبا",
        "\r\n",
        "\u00a0",
        "\u3000",
        " ",
        "\t",
        "🙂",
    ]
)
TEXT = (
    st.lists(st.one_of(TRICKY, st.text(min_size=1, max_size=8)), min_size=1, max_size=40)
    .map("".join)
    .filter(lambda t: t.strip())
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXT, size=st.integers(1, 40), data=st.data())
def test_chunking_covers_every_character(text: str, size: int, data) -> None:
    overlap = data.draw(st.integers(0, size - 1))
    corpus = pd.DataFrame({"doc_id": ["d"], "text": [text]})
    chunks = chunk_corpus(corpus, size, overlap)
    Chunks.validate(chunks)
    starts, ends = chunks["char_start"].tolist(), chunks["char_end"].tolist()
    assert starts[0] == 0 and ends[-1] == len(text)
    for (s0, e0), (s1, e1) in zip(zip(starts, ends), zip(starts[1:], ends[1:])):
        assert s0 < s1 <= e0 < e1  # advancing, overlapping or touching: no gap
    assert all(0 < e - s <= size for s, e in zip(starts, ends))


def _ws_equal(a: str, b: str) -> bool:
    return re.sub(r"\s+", " ", a.strip()) == re.sub(r"\s+", " ", b.strip())


@settings(max_examples=150, deadline=None)
@given(other=TEXT, text=TEXT, data=st.data())
def test_locate_text_offsets_slice_back(other: str, text: str, data) -> None:
    corpus = pd.DataFrame({"doc_id": ["x", "y"], "text": [other, text]})
    i = data.draw(st.integers(0, len(text) - 1))
    j = data.draw(st.integers(i + 1, len(text)))
    query = text[i:j]
    if data.draw(st.booleans()):
        # re-space the query: every whitespace run becomes some other whitespace run
        query = re.sub(
            r"\s+", lambda m: data.draw(st.sampled_from([" ", "\n", "\r\n  ", "\u00a0"])), query
        )
    doc_id = data.draw(st.sampled_from([None, "y"]))
    hit = locate_text(corpus, query, doc_id)
    if not query.strip():
        assert hit is None
        return
    assert hit is not None
    found_doc, s, e = hit
    doc = dict(zip(corpus["doc_id"], corpus["text"]))[found_doc]
    if doc_id is not None:
        assert found_doc == "y"
    assert 0 <= s < e <= len(doc)
    assert doc[s:e] == query or _ws_equal(doc[s:e], query)


def test_folder_corpus_non_utf8_names_the_file(tmp_path: Path) -> None:
    d = tmp_path / "data"
    (d / "corpus").mkdir(parents=True)
    (d / "corpus" / "ok.txt").write_text("fine", "utf-8")
    (d / "corpus" / "bad.md").write_bytes(b"line one\nline \xff two\n")
    with pytest.raises(InputError) as info:
        load_corpus(d)
    assert Path(info.value.file) == d / "corpus" / "bad.md"
    assert "byte 0xff at line 2" in str(info.value)


def test_csv_non_utf8_row_excludes_header(tmp_path: Path) -> None:
    d = tmp_path / "data"
    d.mkdir()
    (d / "corpus.csv").write_bytes(b"doc_id,text\na,fine\nb,caf\xe9\n")
    with pytest.raises(InputError) as info:
        load_corpus(d)
    assert info.value.row == 2 and "line 3" in str(info.value)


def test_schema_backstop_reports_row_and_field() -> None:
    df = pd.DataFrame({"doc_id": pd.Series(["a", "a"], dtype="str"), "text": ["x", "y"]})
    with pytest.raises(InputError) as info:
        _validate_schema(Corpus, df, Path("corpus.jsonl"), [4, 7])
    assert (info.value.row, info.value.field) == (4, "doc_id")


def test_validated_inputs_are_cached_until_any_file_changes(tmp_path, monkeypatch):
    import shutil

    from conftest import SAMPLE
    from ragspan.tasks.inputs.load import load_workspace

    monkeypatch.setenv("RAGSPAN_HOME", str(tmp_path / "state"))
    data = tmp_path / "data"
    shutil.copytree(SAMPLE, data)
    first = load_workspace(data, "baseline", 800, 100, 3)
    inputs = tmp_path / "state" / "inputs"

    def entries(level: str) -> int:
        return len(list(inputs.glob(f"{level}-*.pickle")))

    assert (entries("base"), entries("ws")) == (1, 1)
    again = load_workspace(data, "baseline", 800, 100, 3)  # served from the cache
    pd.testing.assert_frame_equal(again.answers, first.answers)
    pd.testing.assert_frame_equal(again.chunks, first.chunks)
    assert again.input_files == first.input_files and again.data_dir == data
    # A copy of the same files elsewhere (a CI clone, a DVC checkout) is the same entry.
    copy = tmp_path / "elsewhere"
    shutil.copytree(data, copy)
    assert load_workspace(copy, "baseline", 800, 100, 3).data_dir == copy
    assert (entries("base"), entries("ws")) == (1, 1)
    # Another run argument is another workspace on the same base.
    load_workspace(data, "baseline", 800, 100, 2)
    assert (entries("base"), entries("ws")) == (1, 2)
    # Any edit to an input file is read afresh (same size, even).
    run_file = data / "runs" / "baseline.jsonl"
    text = run_file.read_text(encoding="utf-8")
    first_answer = json.loads(text.splitlines()[0])["answer"]
    swapped = first_answer.replace(first_answer[0], "Z", 1)
    run_file.write_text(text.replace(first_answer, swapped, 1), encoding="utf-8")
    changed = load_workspace(data, "baseline", 800, 100, 3)
    assert changed.answers.loc[0, "answer"] == swapped != first.answers.loc[0, "answer"]
    assert (entries("base"), entries("ws")) == (1, 3)  # a changed run file re-reads only itself
    assert changed.input_files != first.input_files
    # A damaged entry is ignored, not trusted.
    for entry in (tmp_path / "state" / "inputs").glob("*.pickle"):
        entry.write_bytes(b"garbage")
    assert load_workspace(data, "baseline", 800, 100, 3).answers.loc[0, "answer"] == swapped
    # An invalid input is never cached: the error comes back on every load.
    (data / "questions.csv").write_text("nope\n", encoding="utf-8")
    for _ in range(2):
        with pytest.raises(InputError):
            load_workspace(data, "baseline", 800, 100, 3)


def test_an_empty_question_is_allowed_a_null_one_is_not(tmp_path):
    """Answers that answer no question (summaries) have an empty question: judged on the
    claim alone. A null question is still a data error naming the file, row and field."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "corpus.jsonl").write_text(json.dumps({"doc_id": "d", "text": "Paris is in France."}) + "\n")
    (data / "questions.jsonl").write_text(json.dumps({"question_id": "q", "question": ""}) + "\n")
    (data / "runs").mkdir()
    (data / "runs" / "r.jsonl").write_text(json.dumps({"question_id": "q", "answer": "Paris is in France.",
                                                        "retrieved": [{"doc_id": "d", "char_start": 0,
                                                                       "char_end": 19}]}) + "\n")
    ws = load_workspace(data, "r", 800, 100, 3)
    assert ws.answers["question"].tolist() == [""]
    (data / "questions.jsonl").write_text(json.dumps({"question_id": "q", "question": None}) + "\n")
    with pytest.raises(InputError, match="field 'question'"):
        load_workspace(data, "r", 800, 100, 3)
