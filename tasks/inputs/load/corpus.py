"""The corpus: a table (doc_id, text, metadata) or a folder of .txt/.md files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from ragspan.tasks.inputs.load.corpus_store import relpath, stored_corpus

# --------------------------------------------------------------------------- corpus


def _relpath(path: Path, base: Path) -> str:
    return relpath(path, base)


def _metadata(df: pd.DataFrame, columns: list[str], csv: bool) -> dict[str, pd.Series]:
    out = {}
    for c in columns:
        s = df[c]
        if csv:
            s = s.replace("", None)  # a CSV cannot say "no value" any other way
        out[str(c)] = s.infer_objects() if s.dtype == object else s
    return out


def load_corpus(data_dir: Path) -> tuple[pd.DataFrame, dict[str, str]]:
    """corpus.{jsonl,csv,parquet} or a folder corpus/ of .txt/.md files (not both), read
    through the corpus store (tasks/inputs/load/corpus_store.py): the table returned holds its
    texts memory-mapped. Also each file's md5 by path relative to `data_dir`."""
    stored, md5s = stored_corpus(Path(data_dir))
    return stored.frame(), md5s
