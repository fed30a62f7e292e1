"""The corpus on disk: read once per snapshot, in batches, into a columnar store in the
state dir, and memory-mapped by whatever reads a text (docs/decisions.md #56).

A corpus of millions of chunks does not fit the heap as Python strings (about eight
times its text, measured at 1M chunks). So the corpus file (JSONL, CSV, Parquet) or
folder of .txt/.md files is read a batch at a time — each batch parsed, checked (the
first problem in file order raises InputError naming file, row and field, as before)
and appended to `documents.arrow` (doc_id, text: Arrow IPC, uncompressed) — and never
held whole. The entry, keyed by the corpus files' md5s and the loader's code, is the
store layer's directory store `corpus` (tasks/state/_store.py): written aside, sealed,
renamed; a bad input leaves nothing behind; a damaged entry is moved aside and read
again from the files. What a run holds is `StoredCorpus`: the entry's path. Its
`frame()` is a pandas table whose text column is the mapped file's pages (pandas'
Arrow strings: zero-copy), so the corpus costs disk and page cache, not heap. Each
document's text hash (tasks/core/corpus_identity.py) is computed in the batch that read
it, while its text is at hand, and kept beside the texts; metadata columns (small) are
kept as a pickled table. The texts are one file of UTF-8 and one of offsets, mapped as a
single Arrow array: taking rows from it copies only those rows' texts.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
from ragspan.tasks.config import loader_version
from ragspan.tasks.core.corpus_identity import text_hashes
from ragspan.tasks.core.schemas import Corpus
from ragspan.tasks.errors import InputError
from ragspan.tasks.inputs.load.batches import (
    BATCH_BYTES,
    Batch,
    raise_missing_columns,
    table_batches,
)
from ragspan.tasks.inputs.load.files import (
    CORPUS_FILE_SUFFIXES,
    _decode,
    find_table,
)
from ragspan.tasks.inputs.load.problems import _Problems, _strings, _validate_schema
from ragspan.tasks.state import dir_store, file_md5s, mapped_buffer

FORMAT = "corpus-store-3"  # bump when the files below change
# Every text's UTF-8, one after the other, and where each starts: mapped as ONE Arrow
# large_string array. One array, not one per read batch: pandas takes rows from a chunked
# Arrow column by first concatenating its chunks — a copy of every text onto the heap.
TEXTS_FILE = "texts.bin"
OFFSETS_FILE = "offsets.bin"  # int64 little-endian, documents + 1: byte offsets into TEXTS_FILE
IDS_FILE = "doc_ids.arrow"  # doc_id (large_string), corpus order
HASHES_FILE = "text_hashes.npy"  # uint64 per document, corpus order
LENGTHS_FILE = "text_lengths.npy"  # int64 per document (characters): range checks read no text
METADATA_FILE = "metadata.pickle"  # the metadata columns (pandas-typed), corpus order
_REQUIRED = ("doc_id", "text")
_IDS_SCHEMA = pa.schema([("doc_id", pa.large_string())])


@dataclass(frozen=True)
class StoredCorpus:
    """A corpus snapshot in the store: its entry directory. Pickles as the path."""

    path: Path

    def frame(self) -> pd.DataFrame:
        """doc_id, text, metadata columns; the texts memory-mapped (zero-copy)."""
        texts = (self.path / OFFSETS_FILE).stat()
        return _frame(str(self.path), texts.st_ino, texts.st_mtime_ns)  # an entry written anew: mapped anew

    def text_hashes(self) -> np.ndarray:
        """One uint64 per document (tasks/core/corpus_identity.text_hashes), corpus order."""
        return np.load(self.path / HASHES_FILE)

    def text_lengths(self) -> pd.Series:
        """doc_id → the text's length in characters, without reading a text."""
        return pd.Series(np.load(self.path / LENGTHS_FILE), index=self.frame()["doc_id"].tolist())

    def exists(self) -> bool:
        return (self.path / OFFSETS_FILE).is_file()


@lru_cache(maxsize=4)
def _frame(path: str, *_file_identity: int) -> pd.DataFrame:
    # The text column's buffers are the mapped files' pages (zero-copy); the maps live as
    # long as the frame.
    where = Path(path)
    ids = pa.ipc.open_file(pa.memory_map(str(where / IDS_FILE))).read_all().column("doc_id").combine_chunks()
    offsets = pa.memory_map(str(where / OFFSETS_FILE)).read_buffer()
    data = mapped_buffer(where / TEXTS_FILE)  # pages a streaming step can hand back (tasks/state/_mapped.py)
    texts = pa.LargeStringArray.from_buffers(len(ids), offsets, data)
    table = pa.table({"doc_id": ids, "text": texts}).to_pandas()
    metadata: pd.DataFrame = pickle.loads((where / METADATA_FILE).read_bytes())
    return pd.concat([table, metadata], axis=1) if len(metadata.columns) else table


def corpus_files(data_dir: Path) -> tuple[Path | None, list[Path]]:
    """The corpus table (or None) and the files it is read from: the table, or the
    corpus/ folder's .txt/.md files, sorted (hidden files and folders skipped). Not both."""
    folder = data_dir / "corpus"
    path = find_table(data_dir, "corpus", required=not folder.is_dir())
    if path is not None and folder.is_dir():
        raise InputError(folder, None, None, f"found both {path.name} and a corpus/ folder: keep one")
    if path is not None:
        return path, [path]
    files = sorted(
        p for p in folder.rglob("*")
        if p.is_file() and p.suffix.lower() in CORPUS_FILE_SUFFIXES
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )
    if not files:
        raise InputError(folder, None, None, "corpus folder has no .txt or .md files")
    return None, files


def relpath(path: Path, base: Path) -> str:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()


def stored_corpus(data_dir: Path, batch_bytes: int = BATCH_BYTES) -> tuple[StoredCorpus, dict[str, str]]:
    """The corpus of `data_dir` in the store (read and checked now, `batch_bytes` of input
    at a time, unless an entry for these files' bytes is there), and each file's md5 by
    path relative to `data_dir`."""
    data_dir = Path(data_dir)
    table, files = corpus_files(data_dir)
    md5s = {relpath(p, data_dir): m for p, m in zip(files, file_md5s(files))}
    key = hashlib.sha256(repr((FORMAT, loader_version(), sorted(md5s.items()))).encode()).hexdigest()[:32]
    store = dir_store("corpus")
    found = store.checked_dir(key, "reading the corpus files again")
    if found is not None:
        return StoredCorpus(found), md5s
    batches = (table_batches(table, batch_bytes) if table is not None
               else _folder_batches(data_dir / "corpus", files, batch_bytes))
    where = store.write_dir(key, lambda tmp: _write(tmp, batches, table or data_dir / "corpus"), replace=False)
    return StoredCorpus(where), md5s


def _folder_batches(folder: Path, files: list[Path], batch_bytes: int) -> Iterator[Batch]:
    ids: list[str] = []
    texts: list[str] = []
    types: list[str] = []
    size, start = 0, 1
    for p in files:
        raw = p.read_bytes()
        text = _decode(p, raw, 0)  # bytes -> str directly: CRLF kept, offsets match the file
        if not text.strip():
            raise InputError(p, None, "text", "document is empty or whitespace-only")
        ids.append(p.relative_to(folder).as_posix())
        texts.append(text)
        types.append(p.suffix.lower().lstrip("."))
        size += len(raw)
        if size >= batch_bytes:
            yield Batch(list(range(start, start + len(ids))), {"doc_id": ids, "text": texts, "doc_type": types})
            start += len(ids)
            ids, texts, types, size = [], [], [], 0
    if ids:
        yield Batch(list(range(start, start + len(ids))), {"doc_id": ids, "text": texts, "doc_type": types})


# --------------------------------------------------------------------------- writing


@dataclass
class _Seen:
    """What earlier batches told: doc_ids (row of first sight), column names in order."""

    ids: dict[str, int] = field(default_factory=dict)
    columns: dict[str, None] = field(default_factory=dict)




def _write(tmp: Path, batches: Iterator[Batch], source: Path) -> None:
    """Every batch checked and appended; InputError on the first problem (the caller's
    aside directory is then removed: nothing is written)."""
    seen = _Seen()
    hashes: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    metadata: dict[str, list[pd.Series]] = {}  # per column, one piece per batch
    count, is_csv, at = 0, False, 0
    with (pa.ipc.new_file(str(tmp / IDS_FILE), _IDS_SCHEMA) as out_ids, open(tmp / TEXTS_FILE, "wb") as out_texts,
          open(tmp / OFFSETS_FILE, "wb") as out_offsets):
        out_offsets.write(np.zeros(1, dtype="<i8").tobytes())
        for i, batch in enumerate(batches):
            is_csv = batch.csv
            ids, texts = _checked(source, batch, seen, batches, first=i == 0)
            if not ids:
                continue
            out_ids.write_batch(pa.record_batch([pa.array(ids, pa.large_string())], schema=_IDS_SCHEMA))
            encoded = [t.encode("utf-8") for t in texts]  # no lone surrogate: refused when read
            out_texts.write(b"".join(encoded))
            ends = at + np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)))
            out_offsets.write(ends.astype("<i8").tobytes())
            at = int(ends[-1])
            hashes.append(text_hashes(texts))
            lengths.append(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
            for name in seen.columns:
                if name in _REQUIRED:
                    continue
                if name not in metadata and count:  # first met in this batch: no value before
                    metadata[name] = [pd.Series([None] * count, dtype=object)]
                metadata.setdefault(name, []).append(_metadata_piece(batch, name, len(ids)))
            count += len(ids)
    if count == 0:
        raise InputError(source, None, None, "no documents")
    np.save(tmp / HASHES_FILE, np.concatenate(hashes))
    np.save(tmp / LENGTHS_FILE, np.concatenate(lengths))
    (tmp / METADATA_FILE).write_bytes(pickle.dumps(_metadata_frame(metadata, is_csv),
                                                   protocol=pickle.HIGHEST_PROTOCOL))


def _checked(source: Path, batch: Batch, seen: _Seen, rest: Iterator[Batch], first: bool
             ) -> tuple[list[str], list[str]]:
    """The batch's doc_ids and texts, checked; the first problem raised as InputError."""
    seen.columns.update(dict.fromkeys(batch.columns))
    n = len(batch.rows)
    probs = _Problems(source, batch.rows, ("doc_id", batch.columns.get("doc_id", [None] * n)))
    ids = _strings(batch.columns.get("doc_id", [None] * n), "doc_id", probs)
    texts = _strings(batch.columns.get("text", [None] * n), "text", probs)
    for pos, d in enumerate(ids):
        if d is None:
            continue
        if d in seen.ids:
            probs.add(pos, "doc_id", f"duplicate doc_id {d!r} (first at row {seen.ids[d]})")
            break
        seen.ids[d] = batch.rows[pos]
    if probs.found or first:
        raise_missing_columns(source, batch, seen.columns, rest, _REQUIRED)
    probs.raise_first()
    if n:
        frame = pd.DataFrame({"doc_id": pd.Series(ids, dtype="str"), "text": pd.Series(texts, dtype="str")})
        _validate_schema(Corpus, frame, source, batch.rows)  # the backstop, as the whole-file reader's
    return ids, texts  # type: ignore[return-value]  # no None left: raise_first


def _metadata_piece(batch: Batch, name: str, n: int) -> pd.Series:
    if name in batch.typed:
        return batch.typed[name].reset_index(drop=True)
    return pd.Series(batch.columns.get(name, [None] * n), dtype=object)


def _metadata_frame(columns: dict[str, list[pd.Series]], csv_input: bool) -> pd.DataFrame:
    """The metadata columns typed as the whole-file reader typed them: JSON and CSV values
    inferred (a CSV's "" read as no value), Parquet's Arrow types kept."""
    out = {}
    for name, pieces in columns.items():
        s = pd.concat(pieces, ignore_index=True) if len(pieces) > 1 else pieces[0].reset_index(drop=True)
        if s.dtype == object:
            if csv_input:
                s = s.replace("", None)  # a CSV cannot say "no value" any other way
            s = s.infer_objects()
        out[name] = s
    return pd.DataFrame(out)
