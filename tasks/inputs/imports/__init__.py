"""Inputs from where traces live: RAGAS datasets, OpenInference span exports, any table.

Each format module turns its file into `Imported` records (question, answer, contexts in
rank order, where each came from) — pure parsing, bad input as InputError naming the
file, the row and the field. `model.build` then places every context in the corpus
(tasks/core/locate.py: exact, then whitespace-loose, as the loader does for retrieved
text) and returns the questions table, the run records and the report of everything
that could not be mapped; `workspace.write_workspace` writes them as a data directory
(docs/inputs.md), all or nothing.

    ragas          RAGAS EvaluationDataset JSONL / CSV (ragas.py)
    openinference  OpenInference spans, JSONL as Phoenix exports them, or OTLP/JSON (openinference.py);
                   Phoenix's span dataframe as Parquet or CSV (span_table.py)

A file's first bytes say what it is (file_kinds.py): Parquet is read as Parquet whatever
its name; a format the importer does not read (gzip, zip, Excel, SQLite…) is one error line.
    mapping        any JSONL / CSV / Parquet with --map FIELD=COLUMN (mapping.py)
"""

from __future__ import annotations

FORMATS = ("ragas", "openinference", "mapping")

# Document metadata keys that name a corpus document, tried in this order when the user
# names none (`--doc-id-key`): ids first, then the paths LangChain's loaders (`source`) and
# LlamaIndex's readers (`file_path`, `file_name`) record. Here, not in openinference.py, so
# the command's help shows it without importing the parser.
DEFAULT_ID_KEYS = ("doc_id", "document_id", "id", "source", "file_path", "file_name")
