"""Writes this directory's Phoenix exports with the real Phoenix: traces sent to `phoenix serve`,
read back with Phoenix's own client and saved the ways a Phoenix user saves them.

A LangChain app like make_traces.py's (BM25 retriever, ChatOpenAI, a scripted OpenAI-compatible
server on 127.0.0.1) answers make_traces.py's three questions, traced by openinference-instrumentation-
langchain over OTLP/HTTP into a `phoenix serve` started here on 127.0.0.1 (its working dir a
temporary folder: no state kept, nothing leaves the machine). Then
`phoenix.client.Client().spans.get_spans_dataframe()` — Phoenix's span dataframe, indexed
by `context.span_id` — is written as:

    phoenix-spans.parquet            df.to_parquet(...)
    phoenix-spans.csv                df.to_csv(...)                nested values as Python reprs
    phoenix-spans.jsonl              df.to_json(orient="records", lines=True)
    phoenix-trace-dataset.parquet    px.TraceDataset(df).save(dir) (written as trace_dataset-<id>.parquet)
    phoenix-get-spans.jsonl          client.spans.get_spans(...), one span dict a line

The tools are not ragspan dependencies; install them in a venv of their own:

    python -m venv /tmp/pxvenv
    /tmp/pxvenv/bin/pip install -r data/examples/import/requirements-phoenix.txt
    /tmp/pxvenv/bin/python data/examples/import/make_phoenix_exports.py

Ids and times differ on every run; what the files hold does not.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # make_traces.py: the questions and scripted answers
sys.path.insert(0, str(HERE.parents[2]))  # the repository: benchmarks/_support/fake_openai_server.py

from make_traces import ANSWERS, MODEL, scripted_answer

from benchmarks._support.fake_openai_server import FakeOpenAIServer

PROJECT = "ragspan-example"
STEM = "phoenix-"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_phoenix(workdir: Path) -> tuple[subprocess.Popen, str]:
    port, grpc = free_port(), free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(workdir), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(grpc), "PHOENIX_TELEMETRY_ENABLED": "false"}
    log = open(workdir / "phoenix.log", "w")  # noqa: SIM115 (the process holds it)
    proc = subprocess.Popen([sys.executable, "-m", "phoenix.server.main", "serve"], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=1):
                return proc, url
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.5)
    proc.terminate()
    raise SystemExit(f"phoenix serve did not start: see {workdir / 'phoenix.log'}")


def langchain_app(base_url: str) -> Callable[[str], str]:
    """make_traces.py's app in its shortest form (a root chain, the BM25 retriever inside a
    lambda, the prompt, the chat model): five spans a question, so the exports stay small."""
    from langchain_community.document_loaders import TextLoader
    from langchain_community.retrievers import BM25Retriever
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableLambda
    from langchain_openai import ChatOpenAI
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    docs = [d for p in sorted(Path("corpus").glob("*.md")) for d in TextLoader(str(p), encoding="utf-8").load()]
    chunks = RecursiveCharacterTextSplitter(chunk_size=300, chunk_overlap=0).split_documents(docs)
    retriever = BM25Retriever.from_documents(chunks, k=2)
    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
    llm = ChatOpenAI(model=MODEL, base_url=base_url, api_key="not-used", temperature=0)

    def retrieve(question: str) -> dict[str, str]:
        found = retriever.invoke(question)
        return {"context": "\n\n".join(d.page_content for d in found), "question": question}

    chain = RunnableLambda(retrieve) | prompt | llm
    return lambda question: str(chain.invoke(question).content)


def trace_app(phoenix_url: str) -> None:
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource({"openinference.project.name": PROJECT}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"{phoenix_url}/v1/traces")))
    LangChainInstrumentor().instrument(tracer_provider=provider)
    server = FakeOpenAIServer(handler=scripted_answer)
    try:
        os.chdir(HERE)  # documents are read as corpus/NAME.md, as a user's relative paths
        ask = langchain_app(server.url)
        for question in ANSWERS:
            print("langchain:", question, "→", ask(question))
    finally:
        provider.shutdown()
        LangChainInstrumentor().uninstrument()
        server.close()


def export(phoenix_url: str) -> None:
    import phoenix as px
    from phoenix.client import Client

    client = Client(base_url=phoenix_url)
    df = None
    for _ in range(60):  # spans are stored a moment after they arrive
        df = client.spans.get_spans_dataframe(project_identifier=PROJECT)
        if len(df) and (df["span_kind"] == "RETRIEVER").sum() == len(ANSWERS):
            break
        time.sleep(0.5)
    assert df is not None and len(df), "no spans reached Phoenix"
    df.to_parquet(HERE / f"{STEM}spans.parquet")
    df.to_csv(HERE / f"{STEM}spans.csv")
    df.to_json(HERE / f"{STEM}spans.jsonl", orient="records", lines=True)
    with tempfile.TemporaryDirectory() as saved:
        dataset_id = px.TraceDataset(df).save(saved)
        shutil.copyfile(Path(saved) / f"trace_dataset-{dataset_id}.parquet", HERE / f"{STEM}trace-dataset.parquet")
    spans = client.spans.get_spans(project_identifier=PROJECT)
    with open(HERE / f"{STEM}get-spans.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(s, ensure_ascii=False, default=str) + "\n" for s in spans)
    print(f"phoenix {px.__version__}: {len(df)} spans; columns: {', '.join(map(str, df.columns))}; "
          f"index: {df.index.name}")


def main() -> None:
    with tempfile.TemporaryDirectory() as workdir:
        proc, url = start_phoenix(Path(workdir))
        try:
            trace_app(url)
            export(url)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
