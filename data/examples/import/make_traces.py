"""Writes this directory's LangChain and LlamaIndex trace examples with the real tools.

Two small RAG apps over `corpus/` answer three questions each; their OpenInference
instrumentors trace them, and OpenTelemetry's own exporters write the spans as a user's
would:

    langchain-console.json       ConsoleSpanExporter() as it is: pretty JSON (indent 4), one span after another
    langchain-oneline.jsonl      ConsoleSpanExporter(formatter=span.to_json(indent=None)): one span a line
    langchain-otlp.json          the OTLP request of the batch, MessageToJson(request): pretty, ids in base64
    llamaindex-console.json      as above, for the LlamaIndex app
    llamaindex-otlp-oneline.jsonl  one OTLP request a line (MessageToJson(request, indent=None))

LangChain: TextLoader documents (metadata `source`: the file's path), split into chunks,
a BM25 retriever, ChatOpenAI, with the OpenAI instrumentor on beside LangChain's (each LLM
call then also arrives as a trace of its own, as users see). LlamaIndex: SimpleDirectoryReader,
a vector index over a small word-hashing embedding (no model download, built before
tracing starts), its OpenAI LLM.
The answers come from a scripted OpenAI-compatible server on 127.0.0.1
(benchmarks/_support/fake_openai_server.py): nothing leaves the machine. Some answers are wrong on
purpose, so an evaluation finds something.

The tools are not ragspan dependencies; install them in a venv of their own:

    python -m venv /tmp/traces-venv
    /tmp/traces-venv/bin/pip install -r data/examples/import/requirements-traces.txt
    /tmp/traces-venv/bin/python data/examples/import/make_traces.py

Ids and times differ on every run; what the files hold does not.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # the repository: benchmarks/_support/fake_openai_server.py

from benchmarks._support.fake_openai_server import FakeOpenAIServer, Reply, completion

MODEL = "gpt-4o-mini"  # a name LlamaIndex knows the context window of; the server ignores it
# question → the answer the scripted model gives (the second and third are partly wrong)
ANSWERS = {
    "How long is the free trial?":
        "The free trial lasts 14 days. No card is needed to start it.",
    "What does the Team plan cost?":
        "The Team plan costs $15 per member per month. Annual billing costs $120 per member per year.",
    "How long does a password reset link stay valid?":
        "The reset link stays valid for 30 minutes. It is also sent to your phone by text message.",
}


def scripted_answer(body: dict) -> Reply:
    """The answer to whichever question the prompt holds."""
    prompt = " ".join(str(m.get("content")) for m in body.get("messages", []))
    for question, answer in ANSWERS.items():
        if question in prompt:
            return completion(answer, model=MODEL)
    return completion("I don't know.", model=MODEL)


# -- exporters ------------------------------------------------------------------------------


def otlp_json_exporter(path: Path, indent: int | None) -> Any:
    """An exporter writing each batch as an OTLP ExportTraceServiceRequest in protobuf's
    JSON form (what `MessageToJson` gives: camelCase names, ids in base64)."""
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class OtlpJsonFile(SpanExporter):
        def __init__(self) -> None:
            self.out = open(path, "w", encoding="utf-8")  # noqa: SIM115 (closed on shutdown)

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            self.out.write(MessageToJson(encode_spans(spans), indent=indent) + "\n")
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            self.out.close()

    return OtlpJsonFile()


def tracer_provider(exporters: list[tuple[str, Any]]) -> Any:
    """A TracerProvider sending every span to each exporter ("simple": as it ends; "batch":
    all at once on shutdown, so the OTLP file holds one request)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    provider = TracerProvider()
    for how, exporter in exporters:
        provider.add_span_processor(SimpleSpanProcessor(exporter) if how == "simple"
                                    else BatchSpanProcessor(exporter, max_queue_size=4096, max_export_batch_size=4096))
    return provider


def console(path: Path, one_line: bool) -> Any:
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    out = open(path, "w", encoding="utf-8")  # noqa: SIM115 (closed on shutdown)
    if one_line:
        return ConsoleSpanExporter(out=out, formatter=lambda span: span.to_json(indent=None) + os.linesep)
    return ConsoleSpanExporter(out=out)


# -- the two apps -----------------------------------------------------------------------------


def langchain_app(base_url: str) -> Callable[[str], str]:
    from langchain_community.document_loaders import TextLoader
    from langchain_community.retrievers import BM25Retriever
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_openai import ChatOpenAI
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    docs = [d for p in sorted(Path("corpus").glob("*.md")) for d in TextLoader(str(p), encoding="utf-8").load()]
    chunks = RecursiveCharacterTextSplitter(chunk_size=300, chunk_overlap=0).split_documents(docs)
    retriever = BM25Retriever.from_documents(chunks, k=2)
    prompt = ChatPromptTemplate.from_template(
        "Answer from the context only.\n\nContext:\n{context}\n\nQuestion: {question}")
    llm = ChatOpenAI(model=MODEL, base_url=base_url, api_key="not-used", temperature=0)

    def context(found: list) -> str:
        return "\n\n".join(d.page_content for d in found)

    chain = {"context": retriever | context, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()
    return chain.invoke


def llamaindex_app(base_url: str) -> Callable[[str], str]:
    from llama_index.core import Settings, SimpleDirectoryReader, VectorStoreIndex
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.llms.openai import OpenAI

    class WordHashEmbedding(BaseEmbedding):
        """Bag of words hashed into 64 dimensions: retrieval by shared words, no model (and
        short vectors: the embedding spans carry them)."""

        def _vector(self, text: str) -> list[float]:
            v = [0.0] * 64
            for w in re.findall(r"[a-z0-9$]+", text.lower()):
                v[int(hashlib.md5(w.encode()).hexdigest(), 16) % 64] += 1.0
            norm = math.sqrt(sum(x * x for x in v)) or 1.0
            return [x / norm for x in v]

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._vector(text)

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._vector(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._vector(query)

    Settings.embed_model = WordHashEmbedding()
    Settings.llm = OpenAI(model=MODEL, api_base=base_url, api_key="not-used", temperature=0)
    docs = SimpleDirectoryReader("corpus", required_exts=[".md"]).load_data()
    index = VectorStoreIndex.from_documents(docs, transformations=[SentenceSplitter(chunk_size=96, chunk_overlap=0)])
    engine = index.as_query_engine(similarity_top_k=2)
    return lambda q: str(engine.query(q))


def main() -> None:
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
    from openinference.instrumentation.openai import OpenAIInstrumentor

    os.chdir(HERE)  # documents are read as corpus/NAME.md, as a user's relative paths
    server = FakeOpenAIServer(handler=scripted_answer)
    try:
        provider = tracer_provider([
            ("simple", console(HERE / "langchain-console.json", one_line=False)),
            ("simple", console(HERE / "langchain-oneline.jsonl", one_line=True)),
            ("batch", otlp_json_exporter(HERE / "langchain-otlp.json", indent=2)),
        ])
        LangChainInstrumentor().instrument(tracer_provider=provider)
        OpenAIInstrumentor().instrument(tracer_provider=provider)
        ask = langchain_app(server.url)
        for question in ANSWERS:
            print("langchain:", question, "→", ask(question))
        provider.shutdown()
        LangChainInstrumentor().uninstrument()
        OpenAIInstrumentor().uninstrument()

        ask = llamaindex_app(server.url)  # the index is built before tracing starts: queries only
        provider = tracer_provider([
            ("simple", console(HERE / "llamaindex-console.json", one_line=False)),
            ("simple", otlp_json_exporter(HERE / "llamaindex-otlp-oneline.jsonl", indent=None)),
        ])
        LlamaIndexInstrumentor().instrument(tracer_provider=provider)
        for question in ANSWERS:
            print("llamaindex:", question, "→", ask(question))
        provider.shutdown()
    finally:
        server.close()


if __name__ == "__main__":
    main()
