"""`ragspan import`: RAGAS datasets, OpenInference spans and any table become a data
directory the loader accepts; every context not in the corpus is listed; bad input is one
error naming file, row and field, with nothing written."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from ragspan.flows.cli import main
from ragspan.tasks.config import load_settings
from ragspan.tasks.errors import InputError, UsageError
from ragspan.tasks.inputs.imports.workspace import REPORT_FILE, import_workspace
from ragspan.tasks.inputs.load import checked_workspace, load_corpus

from tests.conftest import REPO, SAMPLE

EXAMPLES = REPO / "data" / "examples" / "import"
NOT_IN_CORPUS = "Our support team answers every ticket within one hour"
TABLE_MAP = {"question": "query", "answer": "output", "contexts": "passages", "question_id": "id",
             "doc_ids": "sources", "scores": "similarity"}
CASES = {  # format, file, mapping, answers, contexts located exact / whitespace-loose / not located
    "ragas-jsonl": ("ragas", "ragas.jsonl", None, 4, (11, 1, 1)),
    "ragas-csv": ("ragas", "ragas.csv", None, 4, (11, 1, 1)),
    "openinference": ("openinference", "openinference.jsonl", None, 3, (8, 1, 1)),
    "mapping": ("mapping", "table.jsonl", TABLE_MAP, 4, (11, 1, 1)),
}


def _texts() -> dict[str, str]:
    corpus, _ = load_corpus(SAMPLE)
    return dict(zip(corpus["doc_id"], corpus["text"], strict=True))


@pytest.mark.parametrize("case", list(CASES))
def test_each_example_becomes_a_workspace_the_loader_accepts(tmp_path, case):
    fmt, file, mapping, answers, (exact, loose, missing) = CASES[case]
    out = tmp_path / "ws"
    report = import_workspace(fmt, EXAMPLES / file, SAMPLE, out, mapping=mapping)

    assert (report["answers"], report["located_exact"], report["located_whitespace_loose"],
            report["not_located"]) == (answers, exact, loose, missing)
    assert json.loads((out / REPORT_FILE).read_text()) == report
    [lost] = report["not_located_contexts"]  # listed with where it came from, not dropped silently
    assert lost["text"].startswith(NOT_IN_CORPUS) and lost["rank"] == 4 and lost["source"]

    ws = checked_workspace(out, report["run"], load_settings(None))
    assert len(ws.answers) == answers and len(ws.retrieved) == exact + loose
    texts = _texts()
    run = [json.loads(line) for line in (out / "runs" / f"{report['run']}.jsonl").read_text().splitlines()]
    for rec in run:  # every located context points at real corpus text, in the window
        assert rec["context_k"] == len(rec["retrieved"])
        for item in rec["retrieved"]:
            assert texts[item["doc_id"]][item["char_start"]:item["char_end"]].strip()


def test_ragas_fields_map_and_the_unmapped_ones_are_named(tmp_path):
    report = import_workspace("ragas", EXAMPLES / "ragas.jsonl", SAMPLE, tmp_path / "ws")
    questions = [json.loads(x) for x in (tmp_path / "ws" / "questions.jsonl").read_text().splitlines()]
    first = json.loads((EXAMPLES / "ragas.jsonl").read_text().splitlines()[0])
    assert questions[0]["question"] == first["user_input"]
    assert questions[0]["reference_answer"] == first["reference"]
    assert report["fields_not_mapped"] == {"reference_contexts": 2}


def test_ragas_context_ids_name_the_document_to_look_in(tmp_path):
    texts = _texts()
    passage = "Each team can have up to 50 members"
    assert passage in texts["faq/account.md"]
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps({"user_input": "q", "response": "Up to 50.", "retrieved_contexts": [passage, passage],
                               "retrieved_context_ids": ["faq/account.md", "faq/billing.md"]}) + "\n")
    report = import_workspace("ragas", src, SAMPLE, tmp_path / "ws")
    assert report["located_exact"] == 1  # the second names a document that does not hold it
    assert report["not_located_contexts"][0]["reason"] == "not in document 'faq/billing.md' (from retrieved_context_ids)"
    src.write_text(json.dumps({"user_input": "q", "response": "a", "retrieved_contexts": ["x"],
                               "retrieved_context_ids": ["a", "b"]}) + "\n")
    with pytest.raises(InputError, match="row 1, field 'retrieved_context_ids': 2 ids for 1 retrieved_contexts"):
        import_workspace("ragas", src, SAMPLE, tmp_path / "ws2")


def test_nested_spans_give_the_root_question_the_llm_answer_and_the_retriever_documents(tmp_path):
    spans = [json.loads(x) for x in (EXAMPLES / "openinference.jsonl").read_text().splitlines()]
    report = import_workspace("openinference", EXAMPLES / "openinference.jsonl", SAMPLE, tmp_path / "ws")
    trace = spans[0]["context"]["trace_id"]
    by_kind = {s["span_kind"]: s for s in spans if s["context"]["trace_id"] == trace}
    [root] = [s for s in spans if s["context"]["trace_id"] == trace and s["parent_id"] is None]
    assert by_kind["RETRIEVER"]["parent_id"] != root["context"]["span_id"]  # nested two deep
    rec = json.loads((tmp_path / "ws" / "runs" / "openinference.jsonl").read_text().splitlines()[0])
    q = json.loads((tmp_path / "ws" / "questions.jsonl").read_text().splitlines()[0])
    assert rec["question_id"] == q["question_id"] == trace
    assert q["question"] == root["attributes"]["input.value"]
    assert rec["answer"] == by_kind["LLM"]["attributes"]["llm.output_messages"][0]["message.content"]
    docs = by_kind["RETRIEVER"]["attributes"]["retrieval.documents"]
    assert [i["doc_id"] for i in rec["retrieved"]] == [d["document.id"] for d in docs]
    assert [i["score"] for i in rec["retrieved"]] == [d["document.score"] for d in docs]
    # A trace of one LLM call and no retriever is not an answer to evaluate: one note counts them.
    assert "trace " + "f" * 32 not in {s["source"] for s in report["skipped"]}
    lonely = sum(1 for s in spans if s["context"]["trace_id"] == "f" * 32 and s["span_kind"] == "LLM")
    assert f"LLM spans without a retriever in the same trace: {lonely}" in report["notes"]


def _otlp_line(trace: str, span: str, parent: str | None, attrs: dict) -> dict:
    def value(v):
        if isinstance(v, str):
            return {"stringValue": v}
        if isinstance(v, float):
            return {"doubleValue": v}
        return {"arrayValue": {"values": [value(x) for x in v]}}
    sp = {"traceId": trace, "spanId": span, "name": "s", "startTimeUnixNano": "1", "endTimeUnixNano": "2",
          "attributes": [{"key": k, "value": value(v)} for k, v in attrs.items()]}
    if parent:
        sp["parentSpanId"] = parent
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": [sp]}]}]}


def test_otlp_json_exports_are_read_too(tmp_path):
    texts = _texts()
    doc = "faq/account.md"
    passage = texts[doc][:120]
    lines = [_otlp_line("t1", "a", None, {"openinference.span.kind": "CHAIN", "input.value": "How do I add a teammate?"}),
             _otlp_line("t1", "b", "a", {"openinference.span.kind": "RETRIEVER",
                                         "retrieval.documents.0.document.id": doc,
                                         "retrieval.documents.0.document.content": passage,
                                         "retrieval.documents.0.document.score": 0.5}),
             _otlp_line("t1", "c", "a", {"openinference.span.kind": "LLM", "output.value": "Owners invite members."})]
    src = tmp_path / "otlp.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    report = import_workspace("openinference", src, SAMPLE, tmp_path / "ws")
    rec = json.loads((tmp_path / "ws" / "runs" / "otlp.jsonl").read_text())
    assert report["located_exact"] == 1
    assert rec["retrieved"] == [{"doc_id": doc, "char_start": 0, "char_end": 120, "score": 0.5}]
    assert rec["answer"] == "Owners invite members."


def test_spans_the_opentelemetry_sdk_wrote_as_otlp_json_import(tmp_path):
    # data/examples/import/otlp.jsonl: two traces (query → synthesize → retrieve + llm) made with
    # the OpenTelemetry Python SDK and OpenInference attribute names, encoded as OTLP/JSON.
    ragas = [json.loads(x) for x in (EXAMPLES / "ragas.jsonl").read_text().splitlines()][:2]
    report = import_workspace("openinference", EXAMPLES / "otlp.jsonl", SAMPLE, tmp_path / "ws")
    assert (report["answers"], report["located_exact"], report["located_whitespace_loose"]) == (2, 5, 1)
    questions = [json.loads(x) for x in (tmp_path / "ws" / "questions.jsonl").read_text().splitlines()]
    runs = [json.loads(x) for x in (tmp_path / "ws" / "runs" / "otlp.jsonl").read_text().splitlines()]
    assert sorted(q["question"] for q in questions) == sorted(r["user_input"] for r in ragas)
    assert sorted(r["answer"] for r in runs) == sorted(r["response"] for r in ragas)
    assert all(len(r["retrieved"]) == 3 and r["retrieved"][0]["score"] == 0.9 for r in runs)


def test_a_parquet_table_with_list_columns_maps(tmp_path):
    texts = _texts()
    src = tmp_path / "log.parquet"
    pd.DataFrame({"q": ["Can I transfer resources?"], "a": ["Instances can be transferred."],
                  "ctx": [[texts["faq/account.md"][344:500], "nowhere in the corpus"]]}).to_parquet(src)
    report = import_workspace("mapping", src, SAMPLE, tmp_path / "ws",
                              mapping={"question": "q", "answer": "a", "contexts": "ctx"})
    assert (report["located_exact"], report["not_located"]) == (1, 1)
    assert report["not_located_contexts"][0]["text"] == "nowhere in the corpus"


BAD = {  # file name, content, error words (file, row, field)
    "ragas-not-a-list": ("r.jsonl", ('{"user_input": "q", "response": "a", "retrieved_contexts": "one"}\n'
                                     '{"user_input": "q", "response": "a", "retrieved_contexts": 5}\n'),
                         "r.jsonl: row 1, field 'retrieved_contexts': expected a list, got str 'one'"),
    "ragas-item-not-a-string": ("r.jsonl", '{"user_input": "q", "response": "a", "retrieved_contexts": ["x", 3]}\n',
                                "r.jsonl: row 1, field 'retrieved_contexts[1]': expected a string"),
    "ragas-multi-turn": ("r.jsonl", '{"user_input": [{"content": "hi", "type": "human"}]}\n',
                         "r.jsonl: row 1, field 'user_input': a multi-turn sample"),
    "ragas-csv-bad-list": ("r.csv", "user_input,response,retrieved_contexts\nq,a,['x'\n",
                           "r.csv: row 1, field 'retrieved_contexts': expected a list"),
    "spans-not-json": ("s.jsonl", '{"name": "x"\n', ("s.jsonl: row 1: not valid JSON at line 2, column 1 (Expecting ',' delimiter); "
                        "accepted: one JSON object a line")),
    "spans-no-trace": ("s.jsonl", '{"name": "x", "context": {"span_id": "a"}}\n',
                       "s.jsonl: row 1, field 'context.trace_id': missing"),
    "spans-bad-score": ("s.jsonl", json.dumps({"context": {"trace_id": "t", "span_id": "r"}, "span_kind": "RETRIEVER",
                                               "attributes": {"retrieval.documents": [
                                                   {"document.content": "x", "document.score": "high"}]}}) + "\n",
                        "s.jsonl: row 1, field 'attributes.retrieval.documents.0.document.score': expected a number"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_names_file_row_and_field_and_writes_nothing(tmp_path, case):
    name, content, words = BAD[case]
    src = tmp_path / name
    src.write_text(content)
    fmt = "ragas" if case.startswith("ragas") else "openinference"
    with pytest.raises(InputError) as err:
        import_workspace(fmt, src, SAMPLE, tmp_path / "ws")
    assert words in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no workspace, no staging folder


def test_mapping_errors_name_the_column_and_the_row(tmp_path):
    src = tmp_path / "t.csv"
    src.write_text('q,a,ctx,s\nwhat,this,"[""x""]","[0.5]"\nwhat,that,"[""x"", ""y""]","[0.5, ""n/a""]"\n')
    base = {"question": "q", "answer": "a", "contexts": "ctx"}
    with pytest.raises(InputError, match=r"t.csv: row 2, field 's\[1\]': expected a number"):
        import_workspace("mapping", src, SAMPLE, tmp_path / "ws", mapping={**base, "scores": "s"})
    with pytest.raises(InputError, match="field 'context': no such column"):
        import_workspace("mapping", src, SAMPLE, tmp_path / "ws", mapping={**base, "contexts": "context"})
    assert not (tmp_path / "ws").exists()


def test_a_failure_after_parsing_leaves_nothing_and_a_full_out_dir_is_refused(tmp_path):
    bad_corpus = tmp_path / "corpus.jsonl"
    bad_corpus.write_text('{"doc_id": "a", "text": ""}\n')
    with pytest.raises(InputError) as err:
        import_workspace("ragas", EXAMPLES / "ragas.jsonl", bad_corpus, tmp_path / "ws")
    assert str(err.value).startswith(f"{bad_corpus}: row 1, field 'text'")  # the user's file, not a copy
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl"]
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="already exists and is not empty"):
        import_workspace("ragas", EXAMPLES / "ragas.jsonl", SAMPLE, tmp_path / "ws")
    assert [p.name for p in (tmp_path / "ws").iterdir()] == ["keep.txt"]


def test_the_command_imports_then_validate_accepts_it(tmp_path, capsys):
    out = tmp_path / "ws"
    assert main(["import", "mapping", str(EXAMPLES / "table.jsonl"), "--corpus", str(SAMPLE), "--out", str(out),
                 "--map", *(f"{k}={v}" for k, v in TABLE_MAP.items())]) == 0
    said = capsys.readouterr().out
    assert "not located: row 3 (question q03), rank 4" in said and "fields not mapped: latency_ms (4)" in said
    assert main(["validate", "--data", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["answers"] == 4
    assert main(["import", "mapping", str(EXAMPLES / "table.jsonl"), "--corpus", str(SAMPLE),
                 "--out", str(tmp_path / "b"), "--map", "question=query", "answer=output"]) == 2
    assert "--map needs contexts=COLUMN" in capsys.readouterr().err


@pytest.mark.usefixtures("prefect_server", "state_dir")
def test_an_imported_trace_export_evaluates(tmp_path):
    out = tmp_path / "ws"
    import_workspace("openinference", EXAMPLES / "openinference.jsonl", SAMPLE, out)
    assert main(["evaluate", "--data", str(out), "--run", "openinference", "--out", str(tmp_path / "res"), "--quiet"]) == 0
    claims = pd.read_parquet(tmp_path / "res" / "claims.parquet")
    assert set(claims["question_id"]) == {f"{i:032x}" for i in (1, 2, 3)}



def test_a_folder_of_documents_is_a_corpus_too(tmp_path):
    docs = tmp_path / "docs"
    (docs / "guides").mkdir(parents=True)
    (docs / "guides" / "a.md").write_text("# Limits\n\nEach team can have up to 50 members.\n")
    src = tmp_path / "r.csv"
    src.write_text('user_input,response,retrieved_contexts\nHow many members?,Up to 50.,"[\'Each team can have '
                   'up to   50 members.\']"\n')
    report = import_workspace("ragas", src, docs, tmp_path / "ws")
    assert report["located_whitespace_loose"] == 1
    assert (tmp_path / "ws" / "corpus" / "guides" / "a.md").read_bytes() == (docs / "guides" / "a.md").read_bytes()
    rec = json.loads((tmp_path / "ws" / "runs" / "r.jsonl").read_text())
    assert rec["retrieved"] == [{"doc_id": "guides/a.md", "char_start": 10, "char_end": 46}]


# -- a file in a format the importer does not read: one line, exit 2, nothing written ----------


def _zip(names: list[str]) -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name in names:
            z.writestr(name, "x")
    return buf.getvalue()


def _sqlite(tmp_path) -> bytes:
    import sqlite3

    db = tmp_path / "db"
    with sqlite3.connect(db) as con:
        con.execute("create table t (a)")
    con.close()
    data = db.read_bytes()
    db.unlink()
    return data


BINARY = {  # name the user gave it, its bytes, the format the error names
    "gzip": ("spans.jsonl", lambda tmp: __import__("gzip").compress(b'{"a": 1}\n'), "a gzip file"),
    "zip": ("spans.json", lambda tmp: _zip(["spans.jsonl"]), "a zip archive file"),
    "xlsx": ("table.csv", lambda tmp: _zip(["[Content_Types].xml", "xl/workbook.xml"]), "an Excel workbook (.xlsx) file"),
    "xls": ("table.csv", lambda tmp: b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 100, "an Excel 97-2003 (OLE2) workbook"),
    "sqlite": ("phoenix.db", _sqlite, "a SQLite database file"),
    "pickle": ("df.jsonl", lambda tmp: __import__("pickle").dumps({"a": 1}), "a Python pickle file"),
    "utf-16": ("r.csv", lambda tmp: "user_input,response\n".encode("utf-16"), "a UTF-16 text file"),
}
TAKES = {"ragas": "reads JSONL, CSV or Parquet", "mapping": "reads JSONL, CSV or Parquet",
         "openinference": "reads JSON spans"}


@pytest.mark.parametrize("fmt", list(TAKES))
@pytest.mark.parametrize("kind", list(BINARY))
def test_a_file_in_a_format_the_importer_does_not_read_is_named_in_one_line(tmp_path, capsys, fmt, kind):
    name, make, words = BINARY[kind]
    src = tmp_path / name
    src.write_bytes(make(tmp_path))
    args = ["import", fmt, str(src), "--corpus", str(SAMPLE), "--out", str(tmp_path / "ws")]
    if fmt == "mapping":
        args += ["--map", "question=q", "answer=a", "contexts=c"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {src}: {words}") and "by its first bytes" in err and TAKES[fmt] in err
    assert err.count("\n") == 1
    assert [p.name for p in tmp_path.iterdir()] == [name]  # nothing written


def test_parquet_is_read_as_parquet_whatever_its_name(tmp_path):
    src = tmp_path / "dataset.jsonl"  # Parquet under a JSONL name
    pd.read_json(EXAMPLES / "ragas.jsonl", lines=True).to_parquet(src)
    report = import_workspace("ragas", src, SAMPLE, tmp_path / "ws")
    assert (report["answers"], report["located_exact"], report["not_located"]) == (4, 11, 1)


def test_a_parquet_table_that_is_not_spans_names_the_columns_it_lacks(tmp_path):
    src = tmp_path / "ragas.parquet"
    pd.read_json(EXAMPLES / "ragas.jsonl", lines=True).to_parquet(src)
    with pytest.raises(InputError, match=r"ragas.parquet: field 'context.span_id': no such column: not a span "
                                         r"table .*; columns: user_input, "):
        import_workspace("openinference", src, SAMPLE, tmp_path / "ws")
    assert [p.name for p in tmp_path.iterdir()] == ["ragas.parquet"]
