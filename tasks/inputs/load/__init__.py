"""Load and validate a data directory: corpus, chunks, questions and one run.

Everything the pipeline reads passes through here, so every later step can trust
its tables: ids are unique strings, offsets are in range, every chunk's text is
`doc.text[char_start:char_end]`. Bad input raises `InputError` naming the file, the
row and the field of the *first* problem in file order -- before any judge call.

Row numbers in errors are 1-based *record* numbers:

- JSONL: the physical line number (blank lines are skipped but still counted);
- CSV: the data record number, header excluded (a quoted field spanning several
  lines is still one record); a UTF-8 error also gives the physical line;
- Parquet: the row position, 1-based;
- a folder corpus file: no row (the file itself is the record).

Nested run fields are named like `retrieved[2].chunk_id`; the list index is
0-based (JSON-path style) and the message also gives the 1-based rank.

Text is read strictly as UTF-8 (a leading BOM is stripped) and never
newline-translated: offsets are code-point indices into the raw text.

Modules: files (reading), problems (validation), corpus, chunks, questions,
locate (text → offsets), runs, workspace (the validated whole, its cache, the task).
"""

from ragspan.tasks.core.locate import locate_text
from ragspan.tasks.errors import InputError
from ragspan.tasks.inputs.load.chunks import chunk_corpus, load_chunks
from ragspan.tasks.inputs.load.corpus import load_corpus
from ragspan.tasks.inputs.load.files import (
    CORPUS_FILE_SUFFIXES,
    RUN_KEYS,
    TABLE_SUFFIXES,
    find_table,
    read_table,
)
from ragspan.tasks.inputs.load.questions import load_questions
from ragspan.tasks.inputs.load.runs import run_names
from ragspan.tasks.inputs.load.workspace import (
    Workspace,
    checked_workspace,
    load_inputs,
    load_workspace,
)

__all__ = ["CORPUS_FILE_SUFFIXES", "RUN_KEYS", "TABLE_SUFFIXES", "InputError", "Workspace", "checked_workspace", "chunk_corpus", "find_table", "load_chunks", "load_corpus", "load_inputs", "load_questions", "load_workspace", "locate_text", "read_table", "run_names"]
