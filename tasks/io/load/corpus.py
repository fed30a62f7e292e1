"""The corpus: a table (doc_id, text, metadata) or a folder of .txt/.md files."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
from ragspan.tasks.core.schemas import Corpus
from ragspan.tasks.errors import InputError
from ragspan.tasks.io.load.files import CORPUS_FILE_SUFFIXES, _decode, _read_with_hash, find_table
from ragspan.tasks.io.load.problems import (
    _Problems,
    _require_columns,
    _strings,
    _strip_index,
    _unique,
    _validate_schema,
)

# --------------------------------------------------------------------------- corpus


def _relpath(path: Path, base: Path) -> str:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()


def _load_corpus_folder(data_dir: Path, folder: Path) -> tuple[pd.DataFrame, dict[str, str]]:
    # Sorted for a deterministic corpus order; hidden files/folders (.git, checkpoints) skipped.
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file()
        and p.suffix.lower() in CORPUS_FILE_SUFFIXES
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )
    if not files:
        raise InputError(folder, None, None, "corpus folder has no .txt or .md files")
    ids, texts, types, hashes = [], [], [], {}
    for p in files:
        raw = p.read_bytes()
        text = _decode(p, raw, 0)  # bytes -> str directly: CRLF kept, offsets match the file
        if not text.strip():
            raise InputError(p, None, "text", "document is empty or whitespace-only")
        ids.append(p.relative_to(folder).as_posix())
        texts.append(text)
        types.append(p.suffix.lower().lstrip("."))
        hashes[_relpath(p, data_dir)] = hashlib.md5(raw).hexdigest()
    df = pd.DataFrame(
        {
            "doc_id": pd.Series(ids, dtype="str"),
            "text": pd.Series(texts, dtype="str"),
            "doc_type": pd.Series(types, dtype="str"),
        }
    )
    return _validate_schema(Corpus, df, folder, list(range(1, len(df) + 1))), hashes


def _metadata(df: pd.DataFrame, columns: list[str], csv: bool) -> dict[str, pd.Series]:
    out = {}
    for c in columns:
        s = df[c]
        if csv:
            s = s.replace("", None)  # a CSV cannot say "no value" any other way
        out[str(c)] = s.infer_objects() if s.dtype == object else s
    return out


def load_corpus(data_dir: Path) -> tuple[pd.DataFrame, dict[str, str]]:
    """corpus.{jsonl,csv,parquet} or a folder corpus/ of .txt/.md files (not both)."""
    data_dir = Path(data_dir)
    folder = data_dir / "corpus"
    path = find_table(data_dir, "corpus", required=not folder.is_dir())
    if path is not None and folder.is_dir():
        raise InputError(
            folder, None, None, f"found both {path.name} and a corpus/ folder: keep one"
        )
    if path is None:
        return _load_corpus_folder(data_dir, folder)

    df, digest = _read_with_hash(path)
    _require_columns(path, df, ("doc_id", "text"))
    if not len(df):
        raise InputError(path, None, None, "no documents")
    df, rows = _strip_index(df)
    probs = _Problems(path, rows, ("doc_id", df["doc_id"].tolist()))
    ids = _strings(df["doc_id"].tolist(), "doc_id", probs)
    texts = _strings(df["text"].tolist(), "text", probs)
    _unique(ids, "doc_id", probs, rows)
    probs.raise_first()

    meta_cols = [c for c in df.columns if c not in ("doc_id", "text")]
    out = pd.DataFrame(
        {
            "doc_id": pd.Series(ids, dtype="str"),
            "text": pd.Series(texts, dtype="str"),
            **_metadata(df, meta_cols, path.suffix.lower() == ".csv"),
        }
    )
    out = _validate_schema(Corpus, out, path, rows)
    return out, {_relpath(path, data_dir): digest}
