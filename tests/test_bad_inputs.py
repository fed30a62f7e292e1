"""The bad-input matrix: every malformed input is either one clear error naming the file,
the row and the field (exit code 2, no traceback, nothing written), or a documented
acceptance (SECURITY.md, "Bad input: what is accepted") that this file tests.

Most cases go through `ragspan validate` in-process (no Prefect); a handful through
`ragspan evaluate` to prove nothing is written, and one tiny real evaluate run over the
accepted oddities (BOM, CRLF, ids that look like paths, nested metadata) proves they
survive the whole pipeline.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from ragspan.flows.cli import main
from ragspan.tasks.inputs.load import load_workspace

DOCS = {
    "a.md": "Alpha storage costs $5 per month.\nIt includes 250 GB of storage.",
    "b.md": "Beta compute is billed per second. The minimum charge is 60 seconds.",
}
CHUNKS = [
    {"chunk_id": "a#0", "doc_id": "a.md", "char_start": 0, "char_end": 33, "text": DOCS["a.md"][0:33]},
    {"chunk_id": "a#1", "doc_id": "a.md", "char_start": 34, "char_end": len(DOCS["a.md"])},
    {"chunk_id": "b#0", "doc_id": "b.md", "char_start": 0, "char_end": len(DOCS["b.md"])},
]
QUESTIONS = [
    {"question_id": "q1", "question": "What does Alpha storage cost?"},
    {"question_id": "q2", "question": "How is Beta billed?"},
]
RUN = [
    {"question_id": "q1", "answer": "Alpha storage costs $5 per month.",
     "retrieved": [{"chunk_id": "a#0", "score": 0.9}, {"chunk_id": "b#0", "score": 0.2}], "context_k": 1},
    {"question_id": "q2", "answer": "Beta compute is billed per second.",
     "retrieved": [{"doc_id": "b.md", "char_start": 0, "char_end": 34}, {"text": "It includes 250 GB"}]},
]


def _jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def make_data(root: Path) -> Path:
    (root / "runs").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(_jsonl([{"doc_id": k, "text": v} for k, v in DOCS.items()]), encoding="utf-8")
    (root / "chunks.jsonl").write_text(_jsonl(CHUNKS), encoding="utf-8")
    (root / "questions.jsonl").write_text(_jsonl(QUESTIONS), encoding="utf-8")
    (root / "runs" / "r.jsonl").write_text(_jsonl(RUN), encoding="utf-8")
    return root


# -- mutations ---------------------------------------------------------------------------------


def edit(file: str, line: int, change: Callable[[dict], None]) -> Callable[[Path], None]:
    """Change the JSON record on `line` (1-based) of `file`."""
    def mutate(d: Path) -> None:
        lines = (d / file).read_text(encoding="utf-8").splitlines()
        rec = json.loads(lines[line - 1])
        change(rec)
        lines[line - 1] = json.dumps(rec, ensure_ascii=False)
        (d / file).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return mutate


def put(key: str, value) -> Callable[[dict], None]:
    return lambda rec: rec.__setitem__(key, value)


def drop(key: str) -> Callable[[dict], None]:
    return lambda rec: rec.pop(key)


def item(i: int, value) -> Callable[[dict], None]:
    return lambda rec: rec["retrieved"].__setitem__(i, value)


def drop_everywhere(file: str, key: str) -> Callable[[Path], None]:
    """A column missing from the whole table (a key absent from one JSONL record is null)."""
    def mutate(d: Path) -> None:
        rows = [json.loads(x) for x in (d / file).read_text(encoding="utf-8").splitlines()]
        (d / file).write_text(_jsonl([{k: v for k, v in r.items() if k != key} for r in rows]), encoding="utf-8")
    return mutate


def raw(file: str, line: int, text: str) -> Callable[[Path], None]:
    """Replace `line` of `file` with raw text (not necessarily JSON)."""
    def mutate(d: Path) -> None:
        lines = (d / file).read_text(encoding="utf-8").splitlines()
        lines[line - 1] = text
        (d / file).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return mutate


def write(file: str, content: str | bytes, remove: str | None = None) -> Callable[[Path], None]:
    def mutate(d: Path) -> None:
        if remove:
            (d / remove).unlink()
        (d / file).write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return mutate


def corpus_parquet(change: Callable[[pd.DataFrame], None]) -> Callable[[Path], None]:
    def mutate(d: Path) -> None:
        df = pd.DataFrame([{"doc_id": k, "text": v} for k, v in DOCS.items()])
        change(df)
        df.to_parquet(d / "corpus.parquet", index=False)
        (d / "corpus.jsonl").unlink()
    return mutate


def truncate_last_line(file: str, keep: int) -> Callable[[Path], None]:
    def mutate(d: Path) -> None:
        text = (d / file).read_text(encoding="utf-8").rstrip("\n")
        cut = text.rfind("\n") + 1 + keep
        (d / file).write_text(text[:cut], encoding="utf-8")  # no final newline: a crashed writer
    return mutate


def chain(*mutations: Callable[[Path], None]) -> Callable[[Path], None]:
    def mutate(d: Path) -> None:
        for m in mutations:
            m(d)
    return mutate


BIG = ("Alpha storage costs $5 per month. It includes 250 GB of storage.\n" * 800_000)[:50_000_000]

# -- the matrix --------------------------------------------------------------------------------


@dataclass
class Bad:
    id: str
    mutate: Callable[[Path], None]
    file: str  # the file named in the error (a suffix of the path)
    row: int | None
    field: str | None
    words: str  # must appear in the message (case-insensitive)
    run: str = "r"


C, K, Q, R = "corpus.jsonl", "chunks.jsonl", "questions.jsonl", "runs/r.jsonl"

ERRORS = [
    # corpus
    Bad("corpus-missing-column", drop_everywhere(C, "text"), C, 1, "text", "missing required column"),
    Bad("corpus-missing-value", edit(C, 2, drop("text")), C, 2, "text", "null (or missing)"),
    Bad("corpus-doc-id-wrong-type", edit(C, 2, put("doc_id", 7)), C, 2, "doc_id", "expected a string, got int"),
    Bad("corpus-duplicate-id", edit(C, 2, put("doc_id", "a.md")), C, 2, "doc_id", "duplicate doc_id 'a.md'"),
    Bad("corpus-empty-text", edit(C, 2, put("text", "")), C, 2, "text", "empty string"),
    Bad("corpus-whitespace-text", edit(C, 1, put("text", " \t\r\n ")), C, 1, "text", "whitespace-only"),
    Bad("corpus-null-text", edit(C, 2, put("text", None)), C, 2, "text", "null"),
    Bad("corpus-nan-literal", raw(C, 2, '{"doc_id": "b.md", "text": NaN}'), C, 2, None, "NaN is not valid JSON"),
    Bad("corpus-nan-parquet", corpus_parquet(lambda df: df.__setitem__("text", [DOCS["a.md"], float("nan")])),
        "corpus.parquet", 2, "text", "float NaN"),
    Bad("corpus-non-utf8", write(C, _jsonl([{"doc_id": "a.md", "text": "ok"}]).encode() + b'{"doc_id": "b.md", "text": "caf\xe9"}\n'),
        C, 2, None, "not valid UTF-8"),
    Bad("corpus-truncated-mid-line", truncate_last_line(C, 20), C, 2, None, "not valid JSON"),
    Bad("corpus-lone-surrogate", raw(C, 2, '{"doc_id": "b.md", "text": "half an emoji \\ud83d here"}'), C, 2, "text", "surrogate"),
    Bad("corpus-duplicate-key", raw(C, 2, '{"doc_id": "b.md", "text": "one", "text": "two"}'), C, 2, None, "duplicate key 'text'"),
    Bad("corpus-nested-too-deep", raw(C, 2, '{"doc_id": "b.md", "text": "x", "meta": ' + "[" * 50_000 + "]" * 50_000 + "}"),
        C, 2, None, "nested too deeply"),
    Bad("corpus-not-an-object", raw(C, 1, '["a.md", "text"]'), C, 1, None, "expected a JSON object"),
    # chunks
    Bad("chunks-missing-column", drop_everywhere(K, "char_end"), K, 1, "char_end", "missing required column"),
    Bad("chunks-float-offset", edit(K, 2, put("char_start", 34.5)), K, 2, "char_start", "expected an integer, got float"),
    Bad("chunks-string-offset", edit(K, 2, put("char_end", "40")), K, 2, "char_end", "expected an integer, got str"),
    Bad("chunks-offset-out-of-range", edit(K, 3, put("char_end", 10**9)), K, 3, "char_end", "out of range"),
    Bad("chunks-offset-negative", edit(K, 1, put("char_start", -1)), K, 1, "char_start", "out of range"),
    Bad("chunks-offsets-reversed", chain(edit(K, 2, put("char_start", 50)), edit(K, 2, put("char_end", 40))), K, 2, "char_end", "must be greater than char_start"),
    Bad("chunks-text-mismatch", edit(K, 1, put("text", "Alpha storage costs $6 per month.")), K, 1, "text", "does not match"),
    Bad("chunks-dangling-doc", edit(K, 3, put("doc_id", "ghost.md")), K, 3, "doc_id", "unknown doc_id 'ghost.md'"),
    Bad("chunks-duplicate-id", edit(K, 3, put("chunk_id", "a#1")), K, 3, "chunk_id", "duplicate chunk_id"),
    Bad("chunks-csv-duplicate-header", write("chunks.csv", "chunk_id,doc_id,char_start,char_end,char_end\na#0,a.md,0,5,6\n", remove=K),
        "chunks.csv", None, "char_end", "duplicate column"),
    Bad("chunks-csv-unclosed-quote", write("chunks.csv", 'chunk_id,doc_id,char_start,char_end\n"a#0,a.md,0,5\n', remove=K),
        "chunks.csv", None, None, "cannot parse CSV"),
    # questions
    Bad("questions-missing-column", write(Q, _jsonl([{"question_id": "q1", "text": "?"}])), Q, 1, "question", "missing required column"),
    Bad("questions-duplicate-id", edit(Q, 2, put("question_id", "q1")), Q, 2, "question_id", "duplicate question_id 'q1'"),
    Bad("questions-null-question", edit(Q, 2, put("question", None)), Q, 2, "question", "null"),
    Bad("questions-two-formats", write("questions.csv", "question_id,question\nq1,x\n"), "questions", None, None, "keep exactly one"),
    # runs
    Bad("run-unknown-question", edit(R, 2, put("question_id", "q9")), R, 2, "question_id", "unknown question_id 'q9'"),
    Bad("run-duplicate-question", edit(R, 2, put("question_id", "q1")), R, 2, "question_id", "duplicate question_id 'q1'"),
    Bad("run-unknown-chunk", edit(R, 1, item(1, {"chunk_id": "b#7"})), R, 1, "retrieved[1].chunk_id", "unknown chunk_id 'b#7'"),
    Bad("run-extra-key", edit(R, 1, lambda r: r.__setitem__("retreived", r["retrieved"])), R, 1, "retreived", "unknown key"),
    Bad("run-missing-retrieved", edit(R, 2, drop("retrieved")), R, 2, "retrieved", "missing"),
    Bad("run-answer-wrong-type", edit(R, 1, put("answer", ["Alpha"])), R, 1, "answer", "expected a string, got list"),
    Bad("run-answer-whitespace", edit(R, 2, put("answer", "\u00a0 \n")), R, 2, "answer", "whitespace-only"),
    Bad("run-offsets-reversed", edit(R, 2, item(0, {"doc_id": "b.md", "char_start": 30, "char_end": 3})), R, 2,
        "retrieved[0].char_end", "reversed"),
    Bad("run-offsets-out-of-range", edit(R, 2, item(0, {"doc_id": "b.md", "char_start": 0, "char_end": 999})), R, 2,
        "retrieved[0].char_end", "out of range"),
    Bad("run-dangling-doc", edit(R, 2, item(0, {"doc_id": "../a.md", "char_start": 0, "char_end": 3})), R, 2,
        "retrieved[0].doc_id", "unknown doc_id '../a.md'"),
    Bad("run-text-not-in-corpus", edit(R, 2, item(1, {"text": "It includes 500 GB"})), R, 2, "retrieved[1].text", "not found"),
    Bad("run-infinite-score", raw(R, 1, '{"question_id": "q1", "answer": "x", "retrieved": [{"chunk_id": "a#0", "score": 1e999}]}'),
        R, 1, "retrieved[0].score", "finite"),
    Bad("run-score-none-string", edit(R, 1, item(0, {"chunk_id": "a#0", "score": "NaN"})), R, 1, "retrieved[0].score", "expected a number"),
    Bad("run-context-k-bool", edit(R, 1, put("context_k", True)), R, 1, "context_k", "expected an integer"),
    Bad("run-in-context-partial", edit(R, 2, lambda r: r["retrieved"][0].__setitem__("in_context", True)), R, 2,
        "retrieved[1].in_context", "all must"),
    Bad("run-empty-claim", edit(R, 1, put("claims", ["Alpha costs $5.", "  "])), R, 1, "claims[1]", "non-empty string"),
    Bad("run-truncated-mid-line", truncate_last_line(R, 40), R, 2, None, "not valid JSON"),
    Bad("run-name-with-dotdot", lambda d: None, "runs", None, None, "invalid run name", run="../r"),
    Bad("run-name-with-separator", lambda d: None, "runs", None, None, "invalid run name", run="sub/r"),
]


def _one_error_line(err: str) -> None:
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err, err


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


@pytest.mark.parametrize("case", ERRORS, ids=[c.id for c in ERRORS])
def test_bad_input_is_one_clear_error_naming_file_row_and_field(tmp_path, capsys, case):
    data = make_data(tmp_path / "data")
    case.mutate(data)
    before = _files(tmp_path)
    code = main(["validate", "--data", str(data), "--run", case.run])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    _one_error_line(err)
    message = err.removeprefix("error: ")
    path = message.split(": ")[0]
    assert path.endswith(case.file), err
    if case.row is None:
        assert ": row " not in err, err
    else:
        assert f": row {case.row}" in err, err
    if case.field is None:
        assert "field '" not in err, err
    else:
        assert f"field '{case.field}'" in err, err
    assert case.words.lower() in err.lower(), err
    assert _files(tmp_path) == before  # validate writes nothing, anywhere


def test_the_matrix_covers_every_input_file():
    assert len(ERRORS) >= 25
    files = {c.file.split("/")[0].split(".")[0] for c in ERRORS}
    assert files == {"corpus", "chunks", "questions", "runs"}


# -- evaluate: the same errors stop it before the flow, and nothing is written -----------------

THROUGH_EVALUATE = ["corpus-non-utf8", "chunks-text-mismatch", "run-unknown-question", "run-truncated-mid-line",
                    "corpus-lone-surrogate", "run-name-with-dotdot"]


@pytest.mark.usefixtures("prefect_server", "state_dir")
@pytest.mark.parametrize("case", [c for c in ERRORS if c.id in THROUGH_EVALUATE], ids=THROUGH_EVALUATE)
def test_evaluate_on_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, case, state_dir):
    data = make_data(tmp_path / "data")
    case.mutate(data)
    out = tmp_path / "results" / "out"
    code = main(["evaluate", "--data", str(data), "--run", case.run, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    _one_error_line(err)
    assert not (tmp_path / "results").exists()  # not the dir, not its parent, no temp dir
    assert not (state_dir / "judge-cache.sqlite").exists()  # no judge was even built


# -- documented acceptances ---------------------------------------------------------------------


def _bom(file: str) -> Callable[[Path], None]:
    return lambda d: (d / file).write_bytes(b"\xef\xbb\xbf" + (d / file).read_bytes())


def _crlf_everywhere(d: Path) -> None:
    """A Windows editor: CRLF line terminators in every file, and CRLF/CR inside the text."""
    text_a = "Alpha storage costs $5 per month.\r\nIt includes 250 GB of storage.\rOld Mac line."
    (d / "corpus.jsonl").write_bytes(_jsonl([{"doc_id": "a.md", "text": text_a},
                                             {"doc_id": "b.md", "text": DOCS["b.md"]}]).replace("\n", "\r\n").encode())
    chunks = [{"chunk_id": "a#0", "doc_id": "a.md", "char_start": 0, "char_end": 33},
              {"chunk_id": "a#1", "doc_id": "a.md", "char_start": 35, "char_end": len(text_a)},
              {"chunk_id": "b#0", "doc_id": "b.md", "char_start": 0, "char_end": len(DOCS["b.md"])}]
    (d / "chunks.jsonl").write_bytes(_jsonl(chunks).replace("\n", "\r\n", 1).encode())  # mixed: one CRLF, then LF
    (d / "questions.jsonl").unlink()
    (d / "questions.csv").write_bytes(b"question_id,question\r\nq1,What does it cost?\nq2,\"How is\r\nBeta billed?\"\r\n")


def _path_like_ids(d: Path) -> None:
    ids = {"a.md": "../../outside/a.md", "b.md": "/etc/b.md\\..\\x"}
    for name in ("corpus.jsonl", "chunks.jsonl", "runs/r.jsonl"):
        text = (d / name).read_text(encoding="utf-8")
        for old, new in ids.items():
            text = text.replace(json.dumps(old), json.dumps(new))
        (d / name).write_text(text, encoding="utf-8")


@dataclass
class Ok:
    id: str
    mutate: Callable[[Path], None]
    check: Callable[[object], None]  # gets the loaded Workspace
    seconds: float = 10.0


ACCEPTED = [
    # A UTF-8 BOM is stripped: it is not part of the first value, and offsets don't count it.
    Ok("bom-jsonl", _bom(C), lambda ws: ws.corpus["doc_id"].tolist() == list(DOCS)),
    Ok("bom-csv-header", chain(write("questions.csv", "\ufeffquestion_id,question\nq1,a?\nq2,b?\n", remove=Q)),
       lambda ws: ws.questions["question_id"].tolist() == ["q1", "q2"]),
    # Line endings are data: never translated, "\r\n" is two code points (docs/inputs.md).
    Ok("crlf-and-mixed-line-endings", _crlf_everywhere,
       lambda ws: ws.corpus.set_index("doc_id").loc["a.md", "text"][33:35] == "\r\n"
       and ws.questions.set_index("question_id").loc["q2", "question"] == "How is\r\nBeta billed?"),
    # Extra columns are metadata, whatever their JSON type.
    Ok("extra-metadata-columns", chain(edit(C, 1, put("source", {"team": "docs", "tags": ["a"]})), edit(C, 2, put("year", 2024))),
       lambda ws: {"source", "year"} <= set(ws.corpus.columns)),
    # Ids are opaque strings, never paths: "/", "\\" and ".." are kept verbatim.
    Ok("path-like-doc-ids", _path_like_ids, lambda ws: "../../outside/a.md" in set(ws.corpus["doc_id"])),
    # No size limit: a 50 MB document loads (and is chunked) in a few seconds.
    Ok("50-MB-document", edit(C, 1, put("text", BIG)), lambda ws: len(ws.corpus["text"][0]) == 50_000_000, seconds=30),
    # A 1-million-character answer is an answer.
    Ok("1M-character-answer", edit(R, 1, put("answer", "Alpha storage costs $5 per month. " * 29_412)),
       lambda ws: len(ws.answers["answer"][0]) > 1_000_000),
    # Non-BMP and combining text in ids and answers.
    Ok("unicode-ids", chain(edit(Q, 2, put("question_id", "q2-東京-🙂")), edit(R, 2, put("question_id", "q2-東京-🙂"))),
       lambda ws: "q2-東京-🙂" in set(ws.answers["question_id"])),
]


@pytest.mark.parametrize("case", ACCEPTED, ids=[c.id for c in ACCEPTED])
def test_documented_acceptances_validate_and_load(tmp_path, capsys, case):
    data = make_data(tmp_path / "data")
    case.mutate(data)
    t0 = time.monotonic()
    code = main(["validate", "--data", str(data), "--run", "r"])
    out, err = capsys.readouterr()
    assert code == 0 and out.startswith("ok: "), err
    assert time.monotonic() - t0 < case.seconds
    ws = load_workspace(data, "r", 800, 100, 3)
    assert case.check(ws)
    # Whatever was accepted, every chunk is still an exact slice of its document.
    texts = dict(zip(ws.corpus["doc_id"], ws.corpus["text"]))
    assert all(0 <= s < e <= len(texts[d]) for d, s, e in zip(ws.chunks["doc_id"], ws.chunks["char_start"], ws.chunks["char_end"]))


@pytest.mark.usefixtures("prefect_server")
def test_accepted_oddities_survive_a_real_evaluate(tmp_path, capsys, state_dir):
    """BOM + CRLF + path-like ids + nested metadata, through the whole flow: spans hold the
    invariant and nothing is written outside --out."""
    data = make_data(tmp_path / "data")
    _crlf_everywhere(data)
    _path_like_ids(data)
    edit(C, 1, put("source", {"team": "docs"}))(data)
    _bom(C)(data)
    out = tmp_path / "results" / "r"
    code = main(["evaluate", "--data", str(data), "--run", "r", "--out", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "results", "state"]
    assert [p.name for p in (tmp_path / "results").iterdir()] == ["r"]
    ws = load_workspace(data, "r", 800, 100, 3)
    texts = dict(zip(ws.corpus["doc_id"], ws.corpus["text"]))
    for name in ("spans.parquet", "diagnoses.parquet"):
        t = pd.read_parquet(out / name).dropna(subset=["char_start"])
        for d, s, e, x in zip(t["doc_id"], t["char_start"], t["char_end"], t["span_text"]):
            assert texts[d][int(s):int(e)] == x
    assert len(pd.read_parquet(out / "diagnoses.parquet")) >= 2
