"""Traces as exporters write them: the LangChain and LlamaIndex examples made by their
OpenInference instrumentors and OpenTelemetry's exporters (data/examples/import/make_traces.py)
import in every layout, locate their contexts through the documents' ids, report what they
did not use, and evaluate; a params file of another workspace does not choose the run."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pandas as pd
import pytest
from ragspan.flows.cli import main
from ragspan.flows.evaluation import run_of_another_workspace
from ragspan.tasks.errors import InputError
from ragspan.tasks.inputs.imports.json_objects import read_objects
from ragspan.tasks.inputs.imports.model import corpus_id
from ragspan.tasks.inputs.imports.spans import hex_id
from ragspan.tasks.inputs.imports.workspace import import_workspace
from ragspan.tasks.inputs.load import load_corpus

from tests.conftest import REPO

EXAMPLES = REPO / "data" / "examples" / "import"
CORPUS = EXAMPLES / "corpus"
APPS = {  # the files one app's spans were written to, by different exporters at once
    "langchain": ("langchain-console.json", "langchain-oneline.jsonl", "langchain-otlp.json"),
    "llamaindex": ("llamaindex-console.json", "llamaindex-otlp-oneline.jsonl"),
}
FILES = [f for files in APPS.values() for f in files]
ID_KEY = {"langchain": "document.metadata.source", "llamaindex": "document.metadata.file_path"}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _spans(file: str) -> list[dict]:
    """The example's spans in the SDK's own shape (the console exports)."""
    return [obj for _, obj in read_objects(EXAMPLES / file, (EXAMPLES / file).read_bytes())]


@pytest.mark.parametrize("app", list(APPS))
def test_every_layout_of_one_export_imports_to_the_same_workspace(tmp_path, app):
    corpus, _ = load_corpus(EXAMPLES)  # its folder corpus/, as the importer reads it
    texts = dict(zip(corpus["doc_id"], corpus["text"], strict=True))
    spans = _spans(APPS[app][0])
    traces_with_retriever = {s["context"]["trace_id"][2:] for s in spans
                             if s["attributes"].get("openinference.span.kind") == "RETRIEVER"}
    runs = []
    for file in APPS[app]:
        out = tmp_path / file
        report = import_workspace("openinference", EXAMPLES / file, CORPUS, out, run="r")
        assert report["answers"] == len(traces_with_retriever) and report["not_located"] == 0
        # every context found through the id its document carries, in that document
        assert report["located_by"] == {ID_KEY[app]: report["contexts"]}
        runs.append(_jsonl(out / "runs" / "r.jsonl"))
        for rec in runs[-1]:
            assert rec["question_id"] in traces_with_retriever  # hex, whatever the exporter wrote
            for item in rec["retrieved"]:
                assert texts[item["doc_id"]][item["char_start"]:item["char_end"]].strip()
    assert all(r == runs[0] for r in runs)  # pretty, one-line, OTLP with base64 ids: one reading


def test_the_report_names_what_the_spans_carried_and_ragspan_did_not_use(tmp_path):
    spans = _spans("langchain-console.json")
    report = import_workspace("openinference", EXAMPLES / "langchain-oneline.jsonl", CORPUS, tmp_path / "ws")
    unmapped = report["fields_not_mapped"]
    with_tokens = sum(1 for s in spans if "llm.token_count.total" in s["attributes"])
    assert with_tokens and unmapped["llm.token_count.total"] == with_tokens
    assert "llm.input_messages.N.message.content" in unmapped
    assert not any(k.startswith(("retrieval.documents.N.document.content", "openinference.span.kind"))
                   for k in unmapped)
    # the OpenAI instrumentor's own LLM spans each arrive as a trace without a retriever: one line
    roots = {s["context"]["trace_id"] for s in spans if s["parent_id"] is None}
    lonely = [s for s in spans if s["attributes"].get("openinference.span.kind") == "LLM"
              and s["parent_id"] is None]
    assert lonely and len(roots) == report["answers"] + len(lonely)
    assert report["notes"] == [f"LLM spans without a retriever in the same trace: {len(lonely)}"]
    assert report["skipped"] == []


def test_a_nested_retriever_without_documents_is_no_note_and_metadata_keys_are_reported(tmp_path):
    spans = _spans("llamaindex-console.json")
    kinds = [s["attributes"].get("openinference.span.kind") for s in spans]
    report = import_workspace("openinference", EXAMPLES / "llamaindex-console.json", CORPUS, tmp_path / "ws")
    assert kinds.count("RETRIEVER") == 2 * report["answers"]  # an outer and an inner span per query
    assert report["notes"] == []
    meta = {k for k in report["fields_not_mapped"] if ".document.metadata." in k}
    assert "retrieval.documents.N.document.metadata.file_size" in meta
    assert not any(k.endswith((".file_path", ".file_name")) for k in meta)  # tried as ids: used


def test_doc_id_key_chooses_the_metadata_key_and_a_key_nobody_has_falls_back_to_text(tmp_path):
    report = import_workspace("openinference", EXAMPLES / "llamaindex-console.json", CORPUS, tmp_path / "a",
                              doc_id_key="file_name")
    assert report["located_by"] == {"document.metadata.file_name": report["contexts"]}
    report = import_workspace("openinference", EXAMPLES / "langchain-console.json", CORPUS, tmp_path / "b",
                              doc_id_key="nowhere")
    assert report["located_by"] == {"text": report["contexts"]} and report["not_located"] == 0
    assert "retrieval.documents.N.document.metadata.source" in report["fields_not_mapped"]


@pytest.mark.usefixtures("prefect_server", "state_dir")
def test_an_imported_langchain_export_evaluates_to_the_scripted_mistakes(tmp_path):
    out = tmp_path / "ws"
    import_workspace("openinference", EXAMPLES / "langchain-console.json", CORPUS, out, run="lc")
    assert main(["evaluate", "--data", str(out), "--out", str(tmp_path / "res"), "--quiet"]) == 0
    diagnoses = pd.read_parquet(tmp_path / "res" / "diagnoses.parquet")
    by_text = dict(zip(diagnoses["claim"], diagnoses["label"], strict=True))
    # make_traces.py's scripted answers: the trial is right, "$15" contradicts the corpus ($12),
    # the text message is in no document
    assert {label for text, label in by_text.items() if "trial" in text} == {"correct"}
    assert {label for text, label in by_text.items() if "$15" in text} == {"synthesis_error"}
    assert {label for text, label in by_text.items() if "text message" in text} == {"hallucination"}


def test_the_command_says_how_contexts_were_located_and_doc_id_key_is_for_traces_only(tmp_path, capsys):
    src = EXAMPLES / "langchain-otlp.json"
    assert main(["import", "openinference", str(src), "--corpus", str(CORPUS), "--out", str(tmp_path / "a"),
                 "--doc-id-key", "source"]) == 0
    report = json.loads((tmp_path / "a" / "import-report.json").read_text())
    assert f"located by: document.metadata.source {report['contexts']}" in capsys.readouterr().out
    assert main(["import", "ragas", str(EXAMPLES / "ragas.jsonl"), "--corpus", str(CORPUS),
                 "--out", str(tmp_path / "b"), "--doc-id-key", "source"]) == 2
    assert "--doc-id-key is for the openinference format only" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


# -- the layouts, and broken input ------------------------------------------------------------


def test_objects_one_after_another_an_array_and_lines_read_alike(tmp_path):
    objs = [{"a": 1}, {"b": [1, {"c": 2}]}]
    forms = {"lines": "".join(json.dumps(o) + "\n" for o in objs),
             "pretty": "".join(json.dumps(o, indent=4) + "\n" for o in objs),
             "glued": "".join(json.dumps(o) for o in objs),
             "array": json.dumps(objs, indent=2)}
    for name, text in forms.items():
        got = read_objects(tmp_path / name, text.encode())
        assert [o for _, o in got] == objs, name
    assert [line for line, _ in read_objects(tmp_path / "p", forms["pretty"].encode())] == [1, 4]


@pytest.mark.parametrize(("text", "words"), [
    ('{\n    "a": 1\n}\n{\n    "b": 2,\n}\n', "row 4: not valid JSON at line 6, column 1"),
    ('[{"a": 1}, 2]', "row 1: not valid JSON at line 1, column 12 (expected a JSON object, got int)"),
    ('[{"a": 1}] {"b": 2}', "text after the closing ']' of the array"),
    ('{"a": 1, "a": 2}', "duplicate key 'a'"),
    ("{\n", "row 1: not valid JSON at line 2, column 1"),
])
def test_broken_input_names_file_position_and_the_forms_accepted(tmp_path, text, words):
    src = tmp_path / "spans.csv"  # the suffix does not decide
    src.write_text(text)
    with pytest.raises(InputError) as err:
        import_workspace("openinference", src, CORPUS, tmp_path / "ws")
    message = str(err.value)
    assert message.startswith(f"{src}: ") and words in message and "OTLP ExportTraceServiceRequest" in message
    assert "\n" not in message and sorted(p.name for p in tmp_path.iterdir()) == ["spans.csv"]


def test_a_file_of_llm_calls_alone_says_so_and_writes_nothing(tmp_path):
    src = tmp_path / "llm.jsonl"
    src.write_text(json.dumps({"context": {"trace_id": "0xaa", "span_id": "0x01"}, "parent_id": None,
                               "attributes": {"openinference.span.kind": "LLM", "output.value": "hi"}}) + "\n")
    with src.open("a") as f:  # and a trace of an index being built: an embedding span alone
        f.write(json.dumps({"context": {"trace_id": "0xbb", "span_id": "0x02"}, "parent_id": None,
                            "attributes": {"openinference.span.kind": "EMBEDDING"}}) + "\n")
    with pytest.raises(InputError, match="nothing to import: LLM spans without a retriever in the same trace: 1; "
                                         "traces with neither a retriever nor an LLM span: 1$"):
        import_workspace("openinference", src, CORPUS, tmp_path / "ws")
    assert [p.name for p in tmp_path.iterdir()] == ["llm.jsonl"]


def test_an_otlp_span_without_ids_is_named_by_its_place_in_the_request(tmp_path):
    request = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "AAECAwQFBgcICQoLDA0ODw==", "spanId": "AAECAwQFBgc="}, {"spanId": "AAECAwQFBgc="}]}]}]}
    src = tmp_path / "req.json"
    src.write_text("\n" + json.dumps(request, indent=2))
    with pytest.raises(InputError, match=r"req.json: row 2, field 'resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[1\]"
                                         r"\.traceId': missing"):
        import_workspace("openinference", src, CORPUS, tmp_path / "ws")


def test_ids_read_the_same_in_hex_0x_and_base64():
    raw = bytes(range(16))
    assert hex_id(raw.hex()) == hex_id("0x" + raw.hex().upper()) == hex_id(base64.b64encode(raw).decode()) \
        == raw.hex()
    assert hex_id(base64.b64encode(raw[:8]).decode()) == raw[:8].hex()
    assert hex_id("t1") == "t1" and hex_id("span-0000001") == "span-0000001"  # hand-written ids stay


def test_a_document_id_is_taken_whole_or_as_the_end_of_a_path():
    by_id = {"faq/a.md": "", "b.md": ""}
    assert corpus_id((("document.id", "uuid-1"), ("document.metadata.file_path", "/home/me/docs/faq/a.md")),
                     by_id) == ("faq/a.md", "document.metadata.file_path")
    assert corpus_id((("document.metadata.source", "corpus\\b.md"),), by_id) == ("b.md", "document.metadata.source")
    assert corpus_id((("document.id", "c.md"),), by_id) == (None, "text")


# -- which run a data directory evaluates -----------------------------------------------------


def test_a_params_file_of_another_workspace_does_not_choose_the_run():
    assert run_of_another_workspace(["imported"], ["baseline"], "p", "d") == (
        "imported", "evaluating imported, the only run in d; p (baseline) is another workspace's")
    assert run_of_another_workspace(["imported"], [], "p", "d") == ("imported", None)
    run, note = run_of_another_workspace(["a", "baseline", "c"], ["x", "baseline"], "p", "d")
    assert run == "baseline" and note and "first of p found among the 3 runs" in note
    assert run_of_another_workspace(["a", "c"], ["baseline"], "p", "d") == (None, None)


@pytest.mark.usefixtures("state_dir")
def test_evaluate_inside_a_dvc_workspace_takes_the_imported_directory_s_own_run(tmp_path, monkeypatch, capsys):
    out = tmp_path / "imported"
    import_workspace("openinference", EXAMPLES / "langchain-oneline.jsonl", CORPUS, out)
    project = tmp_path / "project"
    project.mkdir()
    (project / "params.yaml").write_text("data:\n  dir: data/sample\n  runs: [baseline]\n", encoding="utf-8")
    monkeypatch.chdir(project)
    assert main(["evaluate", "--data", str(out), "--dry-run", "--json"]) == 0
    said = capsys.readouterr()
    assert json.loads(said.out)
    assert "note: evaluating langchain-oneline, the only run in" in said.err and "(baseline)" in said.err


# -- Phoenix: the span dataframe saved as a user saves it -------------------------------------

# What arize-phoenix 20.26.1 wrote (data/examples/import/make_phoenix_exports.py): one LangChain
# app's traces read back with phoenix.client.Client and saved five ways.
PHOENIX = ("phoenix-spans.jsonl",             # get_spans_dataframe().to_json(orient="records", lines=True)
           "phoenix-spans.parquet",           # get_spans_dataframe().to_parquet(...)
           "phoenix-spans.csv",               # get_spans_dataframe().to_csv(...)
           "phoenix-trace-dataset.parquet",   # px.TraceDataset(df).save(dir)
           "phoenix-get-spans.jsonl")         # client.spans.get_spans(...), one span a line


def _workspace(out: Path) -> tuple[str, str, dict]:
    report = json.loads((out / "import-report.json").read_text())
    report.pop("source")
    return (out / "questions.jsonl").read_text(), (out / "runs" / "r.jsonl").read_text(), report


@pytest.mark.parametrize("file", PHOENIX[1:])
def test_each_phoenix_export_imports_as_its_json_lines_form_does(tmp_path, file):
    report = import_workspace("openinference", EXAMPLES / PHOENIX[0], CORPUS, tmp_path / "lines", run="r")
    spans = _jsonl(EXAMPLES / PHOENIX[0])
    assert report["answers"] == len({s["context.trace_id"] for s in spans if s["span_kind"] == "RETRIEVER"}) == 3
    assert report["located_by"] == {"document.metadata.source": report["contexts"]} and report["not_located"] == 0
    import_workspace("openinference", EXAMPLES / file, CORPUS, tmp_path / "other", run="r")
    assert _workspace(tmp_path / "other") == _workspace(tmp_path / "lines")  # questions, runs, report


def test_the_phoenix_tables_are_what_phoenix_writes():
    import pyarrow.parquet as pq

    for file in ("phoenix-spans.parquet", "phoenix-trace-dataset.parquet"):
        schema = pq.read_schema(EXAMPLES / file)
        [index] = [c for c in schema.pandas_metadata["columns"] if c["field_name"] == "__index_level_0__"]
        assert index["name"] == "context.span_id" and "context.span_id" in schema.names
        assert str(schema.field("attributes.retrieval.documents").type).startswith("list<element: struct<")
    assert b"arize" in pq.read_schema(EXAMPLES / "phoenix-trace-dataset.parquet").metadata
    header = (EXAMPLES / "phoenix-spans.csv").read_text().split("\n", 1)[0].split(",")
    assert header.count("context.span_id") == 2  # the index, then the column


def test_a_span_table_without_a_column_ragspan_reads_says_so_in_the_report(tmp_path):
    df = pd.read_parquet(EXAMPLES / "phoenix-spans.parquet").drop(columns=["attributes.input.value"])
    df.to_parquet(tmp_path / "spans.parquet")
    report = import_workspace("openinference", tmp_path / "spans.parquet", CORPUS, tmp_path / "ws")
    assert "the span table has no column attributes.input.value" in report["notes"]
    assert report["answers"] == 3


@pytest.mark.parametrize(("edit", "words"), [
    (lambda df: df.assign(**{"attributes.retrieval.documents": df["attributes.retrieval.documents"].map(
        lambda v: "[{'document.content': 'x'" if isinstance(v, list) else v)}),
     "row 3, field 'attributes.retrieval.documents': expected a list (JSON or a Python literal)"),
    (lambda df: df.drop(columns=["context.trace_id"]),
     "field 'context.trace_id': no such column: not a span table"),
])
def test_a_broken_csv_span_table_names_row_and_column_and_writes_nothing(tmp_path, edit, words):
    df = pd.read_json(EXAMPLES / "phoenix-spans.jsonl", lines=True, dtype=False)
    df = df.set_index("context.span_id", drop=False)
    src = tmp_path / "spans.csv"
    edit(df).to_csv(src)
    with pytest.raises(InputError) as err:
        import_workspace("openinference", src, CORPUS, tmp_path / "ws")
    assert str(err.value).startswith(f"{src}: ") and words in str(err.value)
    assert [p.name for p in tmp_path.iterdir()] == ["spans.csv"]


def test_a_csv_of_another_kind_is_named_as_such(tmp_path, capsys):
    src = tmp_path / "spans.csv"
    src.write_text("user_input,response\nq,a\n")
    assert main(["import", "openinference", str(src), "--corpus", str(CORPUS), "--out", str(tmp_path / "ws")]) == 2
    err = capsys.readouterr().err
    assert "a CSV table without a context.span_id column (columns: user_input, response)" in err
    assert "reads JSON spans" in err and err.count("\n") == 1 and not (tmp_path / "ws").exists()
