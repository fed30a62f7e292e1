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
"""

from __future__ import annotations

import bisect
import csv
import dataclasses
import hashlib
import io
import json
import math
import os
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pandera.pandas as pa
import pyarrow as pyarrow_mod
import pyarrow.parquet as pq
from prefect import task
from prefect.cache_policies import NO_CACHE
from ragspan.tasks.config import Settings
from ragspan.tasks.schemas import Answers, Chunks, Corpus, Questions, Retrieved

TABLE_SUFFIXES = (".jsonl", ".csv", ".parquet")
CORPUS_FILE_SUFFIXES = (".txt", ".md")
_BOM = b"\xef\xbb\xbf"
_WS = re.compile(r"\s+")
# Greedy `.*\s` matched inside [pos, endpos) ends just after the *last* whitespace:
# one C-level scan instead of a Python loop per chunk.
_LAST_WS = re.compile(r".*\s", re.DOTALL)
# A run may not contain a NUL-free query spanning two documents: documents are
# joined with NUL for one fast corpus-wide `str.find`.
_SEP = "\x00"

RUN_KEYS = frozenset({"question_id", "answer", "retrieved", "context_k", "claims"})
ITEM_OPTIONAL_KEYS = frozenset({"score", "in_context"})
ITEM_FORMS = (
    "{'chunk_id'}",
    "{'doc_id', 'char_start', 'char_end'}",
    "{'text', 'doc_id'?}",
)
_ITEM_KEYS = (
    frozenset({"chunk_id", "doc_id", "char_start", "char_end", "text"}) | ITEM_OPTIONAL_KEYS
)


class InputError(ValueError):
    """Bad input: names the file, the 1-based row and the field."""

    def __init__(self, file: str | Path, row: int | None, field: str | None, message: str):
        self.file = str(file)
        self.row = row
        self.field = field
        self.message = message
        where = []
        if row is not None:
            where.append(f"row {row}")
        if field is not None:
            where.append(f"field '{field}'")
        prefix = f"{self.file}: " + (", ".join(where) + ": " if where else "")
        super().__init__(prefix + message)


@dataclass(frozen=True, eq=False)  # eq=False: comparing DataFrames with == is ambiguous
class Workspace:
    data_dir: Path
    run: str | None
    corpus: pd.DataFrame  # Corpus: doc_id, text, metadata columns
    chunks: pd.DataFrame  # Chunks: chunk_id, doc_id, char_start, char_end (+ run's ad-hoc chunks)
    questions: pd.DataFrame  # Questions: question_id, question, reference_answer, metadata
    answers: pd.DataFrame  # Answers (empty, typed, when run is None)
    retrieved: pd.DataFrame  # Retrieved (same)
    input_files: dict[str, str]  # path relative to data_dir (posix) -> md5 of the bytes


# --------------------------------------------------------------------------- reading


def _decode(path: Path, raw: bytes, header_lines: int) -> str:
    """Strict UTF-8; the error names the record (line minus header lines) and the line."""
    raw = raw.removeprefix(_BOM)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        row = line - header_lines if line > header_lines else None
        bad = raw[exc.start : exc.start + 1].hex()
        raise InputError(path, row, None, f"not valid UTF-8: byte 0x{bad} at line {line}") from None


def _reject_constant(name: str) -> Any:
    # Python's json accepts NaN/Infinity; JSON does not, and NaN would pass as a number.
    raise ValueError(f"{name} is not valid JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    # Python's json keeps the last of two equal keys; a record saying two things is bad input.
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"duplicate key {dup!r}")
    return obj


# A JSON escape of a UTF-16 surrogate: either half of a pair (fine) or a lone one, which
# decodes to a str that cannot be encoded as UTF-8 (every output write would fail).
_SURROGATE_ESCAPE = re.compile(r"\\[uU][dD][89a-fA-F]")


def _lone_surrogate_field(obj: dict) -> str | None:
    """The first top-level key whose value holds a lone surrogate, else None."""
    for key, value in obj.items():
        try:
            json.dumps([key, value], ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return key
    return None


def _jsonl_records(path: Path, text: str) -> tuple[list[dict], list[int]]:
    """Parse JSONL: one object per line; blank lines skipped; line numbers kept."""
    records: list[dict] = []
    lines: list[int] = []
    loads = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_unique_keys).decode
    # Split on "\n" only: str.splitlines would also split on U+2028 etc., legal in JSON strings.
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = loads(line)
        except ValueError as exc:
            detail = (
                f"{exc.msg} at column {exc.colno}"
                if isinstance(exc, json.JSONDecodeError)
                else str(exc)
            )
            raise InputError(path, lineno, None, f"not valid JSON ({detail})") from None
        except RecursionError:
            raise InputError(path, lineno, None, "not valid JSON (nested too deeply)") from None
        if not isinstance(obj, dict):
            raise InputError(
                path, lineno, None, f"expected a JSON object, got {type(obj).__name__}"
            )
        if _SURROGATE_ESCAPE.search(line):
            field = _lone_surrogate_field(obj)
            if field is not None:
                raise InputError(
                    path, lineno, field,
                    "lone UTF-16 surrogate escape (e.g. \\ud800): not a Unicode character",
                )
        records.append(obj)
        lines.append(lineno)
    return records, lines


def _read_with_hash(path: Path) -> tuple[pd.DataFrame, str]:
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise InputError(
            path,
            None,
            None,
            f"unsupported file type '{path.suffix}' (use .jsonl, .csv or .parquet)",
        )
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(path, None, None, f"cannot read file: {exc.strerror or exc}") from None
    digest = hashlib.md5(raw).hexdigest()

    if suffix == ".jsonl":
        records, lines = _jsonl_records(path, _decode(path, raw, 0))
        keys: dict[str, None] = {}  # union of keys, in order of first appearance
        for rec in records:
            keys.update(dict.fromkeys(rec))
        # object dtype keeps the JSON types exactly (no int -> float on a missing value);
        # a key absent from a record reads as None.
        index = pd.Index(lines, name="row")
        df = pd.DataFrame(
            {k: pd.Series([r.get(k) for r in records], dtype=object, index=index) for k in keys},
            index=index,
        )
    elif suffix == ".csv":
        text = _decode(path, raw, 1)
        if not text.strip():
            return pd.DataFrame(index=pd.Index([], name="row")), digest
        _check_csv_header(path, text)
        try:
            # Everything as text; empties stay "" and each loader decides what "" means.
            df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
        except (pd.errors.ParserError, ValueError) as exc:
            raise InputError(path, None, None, f"cannot parse CSV: {exc}") from None
        df.index = pd.Index(range(1, len(df) + 1), name="row")
    else:
        try:
            df = pq.read_table(io.BytesIO(raw)).to_pandas()
        except (pyarrow_mod.ArrowException, OSError, ValueError) as exc:
            raise InputError(path, None, None, f"cannot read Parquet: {exc}") from None
        df.index = pd.Index(range(1, len(df) + 1), name="row")
    return df, digest


def _check_csv_header(path: Path, text: str) -> None:
    """pandas silently renames a repeated header `a,a` to `a,a.1`: refuse it instead."""
    try:
        header = next(csv.reader(io.StringIO(text)), [])
    except csv.Error:
        return  # pandas reports the parse error with its own message
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise InputError(path, None, name, "duplicate column in the CSV header")
        seen.add(name)


def read_table(path: Path) -> pd.DataFrame:
    """Read a .jsonl/.csv/.parquet table; the index holds each record's 1-based row number.

    JSONL columns are object dtype (JSON types kept as parsed); CSV columns are all
    strings with empty cells as ""; Parquet columns keep their Arrow types.
    """
    return _read_with_hash(Path(path))[0]


def find_table(data_dir: Path, stem: str, required: bool) -> Path | None:
    """`data_dir/<stem>.{jsonl,csv,parquet}`; two forms at once is ambiguous, so an error."""
    data_dir = Path(data_dir)
    found = [data_dir / f"{stem}{s}" for s in TABLE_SUFFIXES if (data_dir / f"{stem}{s}").is_file()]
    if len(found) > 1:
        names = " and ".join(p.name for p in found)
        raise InputError(data_dir / stem, None, None, f"found both {names}: keep exactly one")
    if found:
        return found[0]
    if required:
        others = sorted(p.name for p in data_dir.glob(f"{stem}.*"))
        hint = f" (found {', '.join(others)}: not a supported format)" if others else ""
        raise InputError(
            data_dir / f"{stem}.jsonl",
            None,
            None,
            f"missing: expected {stem}.jsonl, {stem}.csv or {stem}.parquet in {data_dir}{hint}",
        )
    return None


# --------------------------------------------------------------------------- validation


def _is_missing(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _describe(v: Any) -> str:
    if v is None:
        return "null (or missing)"
    if v is pd.NA:
        return "missing value"
    if isinstance(v, float) and math.isnan(v):
        return "float NaN"
    r = repr(v)
    if len(r) > 40:
        r = r[:37] + "..."
    return f"{type(v).__name__} {r}"


class _Problems:
    """Collects the first problem of each independent check; reports the earliest row.

    Checks run column by column (fast, list-based), but the error must be the first
    problem in *file* order, so each check records only its first failure and the
    minimum (row position, check order) wins.
    """

    def __init__(self, file: Path, rows: list[int]):
        self.file = file
        self.rows = rows
        self.found: list[tuple[int, int, str | None, str]] = []

    def add(self, pos: int, field: str | None, message: str) -> None:
        self.found.append((pos, len(self.found), field, message))

    def raise_first(self) -> None:
        if self.found:
            pos, _, field, message = min(self.found)
            raise InputError(self.file, self.rows[pos], field, message)


def _require_columns(path: Path, df: pd.DataFrame, columns: tuple[str, ...]) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        # No row lacks it more than another; name the first record as where it is missing.
        row = int(df.index[0]) if len(df) else None
        have = ", ".join(map(str, df.columns)) or "none"
        raise InputError(path, row, missing[0], f"missing required column (columns found: {have})")


def _strings(
    values: list, field: str, probs: _Problems, *, blank_ok: bool = False, optional: bool = False
) -> list[str | None]:
    """Check a string column; with optional=True, missing/blank become None."""
    out: list[str | None] = []
    reported = False
    for pos, v in enumerate(values):
        if isinstance(v, str) and (v.strip() if not blank_ok else v):
            out.append(v)
            continue
        if optional and (_is_missing(v) or (isinstance(v, str) and not v.strip())):
            out.append(None)
            continue
        out.append(None)
        if not reported:
            reported = True
            if isinstance(v, str):
                probs.add(pos, field, "empty string" if not v else "whitespace-only string")
            else:
                probs.add(pos, field, f"expected a string, got {_describe(v)}")
    return out


def _as_int(v: Any, lenient_str: bool) -> int | None:
    if isinstance(v, bool):
        return None  # True is an int in Python, not in the data
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)  # Parquet/JSON writers sometimes emit 12.0
    if lenient_str and isinstance(v, str) and re.fullmatch(r"\s*[+-]?\d+\s*", v):
        return int(v)
    return None


def _ints(values: list, field: str, probs: _Problems, lenient_str: bool) -> list[int | None]:
    out: list[int | None] = []
    reported = False
    for pos, v in enumerate(values):
        n = _as_int(v, lenient_str)
        out.append(n)
        if n is None and not reported:
            reported = True
            probs.add(pos, field, f"expected an integer, got {_describe(v)}")
    return out


def _unique(values: list, field: str, probs: _Problems, rows: list[int]) -> None:
    first: dict[Any, int] = {}
    for pos, v in enumerate(values):
        if v is None:
            continue
        if v in first:
            probs.add(pos, field, f"duplicate {field} {v!r} (first at row {rows[first[v]]})")
            return
        first[v] = pos


def _validate_schema(
    model: type[pa.DataFrameModel], df: pd.DataFrame, file: Path, rows: list[int]
) -> pd.DataFrame:
    """Backstop: the pandera model must agree with the checks above; report like them."""
    try:
        return model.validate(df)
    except pa.errors.SchemaError as exc:
        field = getattr(exc.schema, "name", None)
        row = None
        fc = exc.failure_cases
        if isinstance(fc, pd.DataFrame) and len(fc):
            if "column" in fc.columns:
                field = str(fc["column"].iloc[0])
            if "index" in fc.columns:
                try:
                    idx = int(fc["index"].iloc[0])
                except (TypeError, ValueError):
                    idx = -1
                if 0 <= idx < len(rows):
                    row = rows[idx]
        if field == model.__name__:
            field = None
        raise InputError(
            file, row, field, f"schema check failed: {exc.reason_code}: {exc}"
        ) from None


def _strip_index(df: pd.DataFrame) -> tuple[pd.DataFrame, list[int]]:
    rows = [int(r) for r in df.index]
    return df.reset_index(drop=True), rows


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
    probs = _Problems(path, rows)
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


# --------------------------------------------------------------------------- chunks


def chunk_corpus(corpus: pd.DataFrame, size: int, overlap: int) -> pd.DataFrame:
    """Windows of about `size` characters sharing `overlap`, covering every character.

    A window that does not already end at a word boundary is cut just after the last
    whitespace in its second half, if any (never shorter than half a window, so
    chunks stay non-empty and the loop always advances).
    """
    if size <= 0 or not 0 <= overlap < size:
        raise ValueError(
            f"need size > 0 and 0 <= overlap < size, got size={size}, overlap={overlap}"
        )
    cid, did, starts, ends = [], [], [], []
    half = size // 2
    for doc_id, text in zip(corpus["doc_id"].tolist(), corpus["text"].tolist()):
        n = len(text)
        start, i, prev_end = 0, 0, 0
        while True:
            end = min(start + size, n)
            if end < n and not (text[end - 1].isspace() or text[end].isspace()):
                m = _LAST_WS.match(text, start + half, end)
                # Only snap if the chunk still reaches past the previous one (else it
                # would be a useless chunk nested inside its predecessor).
                if m is not None and m.end() > max(start, prev_end):
                    end = m.end()
            cid.append(f"{doc_id}#{i}")
            did.append(doc_id)
            starts.append(start)
            ends.append(end)
            if end >= n:
                break
            start, prev_end = max(end - overlap, start + 1), end
            i += 1
    return pd.DataFrame(
        {
            "chunk_id": pd.Series(cid, dtype="str"),
            "doc_id": pd.Series(did, dtype="str"),
            "char_start": pd.Series(starts, dtype="int64"),
            "char_end": pd.Series(ends, dtype="int64"),
        }
    )


def load_chunks(data_dir: Path, corpus: pd.DataFrame, size: int, overlap: int) -> pd.DataFrame:
    """chunks.* validated against the corpus, or ragspan's own chunking when absent.

    An optional `text` column is checked against the document and dropped; any other
    extra column is dropped (chunks are exactly chunk_id, doc_id, char_start, char_end).
    """
    return _load_chunks(Path(data_dir), corpus, size, overlap)[0]


def _load_chunks(
    data_dir: Path, corpus: pd.DataFrame, size: int, overlap: int
) -> tuple[pd.DataFrame, dict[str, str]]:
    path = find_table(data_dir, "chunks", required=False)
    if path is None:
        return chunk_corpus(corpus, size, overlap), {}
    df, digest = _read_with_hash(path)
    _require_columns(path, df, ("chunk_id", "doc_id", "char_start", "char_end"))
    if not len(df):
        raise InputError(
            path, None, None, "no chunks (delete the file to let ragspan chunk the corpus)"
        )
    df, rows = _strip_index(df)
    lenient = path.suffix.lower() == ".csv"
    doc_text = dict(zip(corpus["doc_id"].tolist(), corpus["text"].tolist()))

    probs = _Problems(path, rows)
    cids = _strings(df["chunk_id"].tolist(), "chunk_id", probs)
    dids = _strings(df["doc_id"].tolist(), "doc_id", probs)
    starts = _ints(df["char_start"].tolist(), "char_start", probs, lenient)
    ends = _ints(df["char_end"].tolist(), "char_end", probs, lenient)
    _unique(cids, "chunk_id", probs, rows)
    texts = df["text"].tolist() if "text" in df.columns else None

    unknown = range_bad = text_bad = False
    for pos, (d, s, e) in enumerate(zip(dids, starts, ends)):
        if d is None:
            continue
        doc = doc_text.get(d)
        if doc is None:
            if not unknown:
                unknown = True
                probs.add(pos, "doc_id", f"unknown doc_id {d!r} (not in the corpus)")
            continue
        if s is None or e is None:
            continue
        if not 0 <= s < e <= len(doc):
            if not range_bad:
                range_bad = True
                if s >= e and 0 <= s and e <= len(doc):
                    probs.add(
                        pos, "char_end", f"char_end ({e}) must be greater than char_start ({s})"
                    )
                else:
                    field = "char_start" if s < 0 or s >= len(doc) else "char_end"
                    probs.add(
                        pos,
                        field,
                        f"offsets [{s}, {e}) out of range: document {d!r} has {len(doc)} characters",
                    )
            continue
        if texts is not None and not text_bad:
            t = texts[pos]
            if lenient and t == "":
                continue  # an empty CSV cell: no text given for this chunk
            if _is_missing(t):
                continue
            if t != doc[s:e]:
                text_bad = True
                probs.add(pos, "text", f"chunk text does not match the document at [{s}, {e})")
    probs.raise_first()

    out = pd.DataFrame(
        {
            "chunk_id": pd.Series(cids, dtype="str"),
            "doc_id": pd.Series(dids, dtype="str"),
            "char_start": pd.Series(starts, dtype="int64"),
            "char_end": pd.Series(ends, dtype="int64"),
        }
    )
    out = _validate_schema(Chunks, out, path, rows)
    return out, {_relpath(path, data_dir): digest}


# --------------------------------------------------------------------------- questions


def load_questions(data_dir: Path) -> pd.DataFrame:
    """questions.*: question_id, question, reference_answer (always present; missing -> NA)."""
    return _load_questions(Path(data_dir))[0]


def _load_questions(data_dir: Path) -> tuple[pd.DataFrame, dict[str, str]]:
    path = find_table(data_dir, "questions", required=True)
    assert path is not None
    df, digest = _read_with_hash(path)
    _require_columns(path, df, ("question_id", "question"))
    if not len(df):
        raise InputError(path, None, None, "no questions")
    df, rows = _strip_index(df)
    probs = _Problems(path, rows)
    qids = _strings(df["question_id"].tolist(), "question_id", probs)
    qs = _strings(df["question"].tolist(), "question", probs)
    refs = (
        _strings(df["reference_answer"].tolist(), "reference_answer", probs, optional=True)
        if "reference_answer" in df.columns
        else [None] * len(df)
    )
    _unique(qids, "question_id", probs, rows)
    probs.raise_first()
    meta_cols = [c for c in df.columns if c not in ("question_id", "question", "reference_answer")]
    out = pd.DataFrame(
        {
            "question_id": pd.Series(qids, dtype="str"),
            "question": pd.Series(qs, dtype="str"),
            "reference_answer": pd.Series(refs, dtype="str"),
            **_metadata(df, meta_cols, path.suffix.lower() == ".csv"),
        }
    )
    out = _validate_schema(Questions, out, path, rows)
    return out, {_relpath(path, data_dir): digest}


# --------------------------------------------------------------------------- locating text


class _TextIndex:
    """The corpus prepared for repeated substring search (exact, then whitespace-normalised).

    Documents are joined with NUL so one C-level `str.find` scans the whole corpus
    in corpus order; the normalised copy is built only if some query needs it.
    """

    def __init__(self, doc_ids: list[str], texts: list[str]):
        self.ids = doc_ids
        self.texts = texts
        self.pos = {d: i for i, d in enumerate(doc_ids)}
        self._joined: tuple[str, list[int]] | None = None
        self._norm: tuple[str, list[int]] | None = None
        self._memo: dict[tuple[str, str | None], tuple[str, int, int] | None] = {}

    @staticmethod
    def _join(texts: list[str]) -> tuple[str, list[int]]:
        starts, at = [], 0
        for t in texts:
            starts.append(at)
            at += len(t) + 1
        return _SEP.join(texts), starts

    def _find_all_docs(self, query: str, normalised: bool) -> tuple[int, int] | None:
        if normalised:
            if self._norm is None:
                self._norm = self._join([_WS.sub(" ", t) for t in self.texts])
            joined, starts = self._norm
        else:
            if self._joined is None:
                self._joined = self._join(self.texts)
            joined, starts = self._joined
        if _SEP in query:  # could straddle two documents in the joined text: go one by one
            for i, t in enumerate(self.texts):
                at = (_WS.sub(" ", t) if normalised else t).find(query)
                if at >= 0:
                    return i, at
            return None
        at = joined.find(query)
        if at < 0:
            return None
        i = bisect.bisect_right(starts, at) - 1
        return i, at - starts[i]

    def locate(self, text: str, doc_id: str | None) -> tuple[str, int, int] | None:
        key = (text, doc_id)
        if key not in self._memo:
            self._memo[key] = self._locate(text, doc_id)
        return self._memo[key]

    def _locate(self, text: str, doc_id: str | None) -> tuple[str, int, int] | None:
        if not text.strip():
            return None
        if doc_id is not None and doc_id not in self.pos:
            return None
        # 1. exact
        if doc_id is not None:
            i, at = self.pos[doc_id], self.texts[self.pos[doc_id]].find(text)
            hit = (i, at) if at >= 0 else None
        else:
            hit = self._find_all_docs(text, normalised=False)
        if hit is not None:
            return self.ids[hit[0]], hit[1], hit[1] + len(text)
        # 2. whitespace runs normalised to one space; ends trimmed so the match starts
        #    and ends on non-space characters (their raw positions are unambiguous).
        query = _WS.sub(" ", text.strip())
        if doc_id is not None:
            i = self.pos[doc_id]
            at = _WS.sub(" ", self.texts[i]).find(query)
            hit = (i, at) if at >= 0 else None
        else:
            hit = self._find_all_docs(query, normalised=True)
        if hit is None:
            return None
        i, at = hit
        doc = self.texts[i]
        start = _norm_to_raw(doc, at)
        end = _norm_to_raw(doc, at + len(query) - 1) + 1
        return self.ids[i], start, end


def _norm_to_raw(doc: str, n_off: int) -> int:
    """Raw index of the character at `n_off` in `_WS.sub(" ", doc)`.

    Each whitespace run of length L became one space, so every run that lies before
    `n_off` shifts the raw index by L - 1.
    """
    shift = 0
    for m in _WS.finditer(doc):
        if m.start() - shift >= n_off:
            break
        shift += m.end() - m.start() - 1
    return n_off + shift


def locate_text(corpus: pd.DataFrame, text: str, doc_id: str | None) -> tuple[str, int, int] | None:
    """Where `text` sits in the corpus: (doc_id, char_start, char_end), or None.

    Exact substring first (within `doc_id` when given, else the first document in
    corpus order that contains it; first occurrence in that document), then the same
    with whitespace runs normalised: any run of whitespace in `text` matches any run
    in the document, leading/trailing whitespace of `text` is ignored, and the
    offsets returned are raw offsets whose slice equals `text` up to whitespace.
    None for blank text or an unknown doc_id.
    """
    return _TextIndex(corpus["doc_id"].tolist(), corpus["text"].tolist()).locate(text, doc_id)


# --------------------------------------------------------------------------- runs


def _empty_answers() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run": pd.Series([], dtype="str"),
            "question_id": pd.Series([], dtype="str"),
            "answer": pd.Series([], dtype="str"),
            "claims": pd.Series([], dtype=object),
        }
    )


def _retrieved_frame(cols: dict[str, list]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "run": pd.Series(cols["run"], dtype="str"),
            "question_id": pd.Series(cols["question_id"], dtype="str"),
            "rank": pd.Series(cols["rank"], dtype="int64"),
            "chunk_id": pd.Series(cols["chunk_id"], dtype="str"),
            "doc_id": pd.Series(cols["doc_id"], dtype="str"),
            "char_start": pd.Series(cols["char_start"], dtype="int64"),
            "char_end": pd.Series(cols["char_end"], dtype="int64"),
            "score": pd.Series(cols["score"], dtype="float64"),
            "in_context": pd.Series(cols["in_context"], dtype="bool"),
        }
    )


_RETRIEVED_COLS = (
    "run",
    "question_id",
    "rank",
    "chunk_id",
    "doc_id",
    "char_start",
    "char_end",
    "score",
    "in_context",
)


def _run_path(data_dir: Path, run: str) -> Path:
    if not run or "/" in run or "\\" in run or run.startswith("."):
        raise InputError(data_dir / "runs", None, None, f"invalid run name {run!r}")
    path = data_dir / "runs" / f"{run}.jsonl"
    if not path.is_file():
        others = (
            sorted(p.name for p in (data_dir / "runs").glob(f"{run}.*"))
            if (data_dir / "runs").is_dir()
            else []
        )
        hint = f" (found {', '.join(others)}: runs must be JSONL)" if others else ""
        raise InputError(
            path,
            None,
            None,
            f"run file not found: runs are JSONL files runs/<run>.jsonl, one record per question{hint}",
        )
    return path


class _RunBuilder:
    """Validates run records one by one (first error in file order) and builds the tables."""

    def __init__(
        self,
        path: Path,
        run: str,
        corpus: pd.DataFrame,
        chunks: pd.DataFrame,
        questions: pd.DataFrame,
        default_context_k: int,
    ):
        self.path, self.run, self.default_k = path, run, default_context_k
        self.qids = set(questions["question_id"].tolist())
        ids, texts = corpus["doc_id"].tolist(), corpus["text"].tolist()
        self.doc_len = {d: len(t) for d, t in zip(ids, texts)}
        self.index = _TextIndex(ids, texts)
        c_ids = chunks["chunk_id"].tolist()
        c_docs = chunks["doc_id"].tolist()
        c_s = chunks["char_start"].tolist()
        c_e = chunks["char_end"].tolist()
        self.chunk = {c: (d, s, e) for c, d, s, e in zip(c_ids, c_docs, c_s, c_e)}
        self.by_span: dict[tuple[str, int, int], str] = {}
        for c, d, s, e in zip(c_ids, c_docs, c_s, c_e):
            self.by_span.setdefault((d, s, e), c)  # the first chunk with these offsets
        self.adhoc: list[tuple[str, str, int, int]] = []
        self.answers: dict[str, list] = {"run": [], "question_id": [], "answer": [], "claims": []}
        self.answer_rows: list[int] = []
        self.ret: dict[str, list] = {k: [] for k in _RETRIEVED_COLS}
        self.ret_rows: list[int] = []
        self.seen: dict[str, int] = {}

    def err(self, row: int, field: str | None, message: str) -> InputError:
        return InputError(self.path, row, field, message)

    def chunk_for(self, doc_id: str, s: int, e: int) -> str:
        """Reuse a chunk with exactly these offsets, else register an ad-hoc one."""
        cid = self.by_span.get((doc_id, s, e))
        if cid is None:
            cid = base = f"{doc_id}@{s}-{e}"
            n = 1
            while cid in self.chunk:  # a user chunk already has this id with other offsets
                n += 1
                cid = f"{base}~{n}"
            self.chunk[cid] = (doc_id, s, e)
            self.by_span[(doc_id, s, e)] = cid
            self.adhoc.append((cid, doc_id, s, e))
        return cid

    def record(self, row: int, rec: dict) -> None:
        for key in rec:
            if key not in RUN_KEYS:
                raise self.err(
                    row, key, f"unknown key (a record has: {', '.join(sorted(RUN_KEYS))})"
                )
        qid = rec.get("question_id")
        if not isinstance(qid, str) or not qid.strip():
            raise self.err(row, "question_id", f"expected a non-empty string, got {_describe(qid)}")
        if qid not in self.qids:
            raise self.err(row, "question_id", f"unknown question_id {qid!r} (not in questions)")
        if qid in self.seen:
            raise self.err(
                row, "question_id", f"duplicate question_id {qid!r} (first at row {self.seen[qid]})"
            )
        self.seen[qid] = row
        answer = rec.get("answer")
        if not isinstance(answer, str):
            raise self.err(row, "answer", f"expected a string, got {_describe(answer)}")
        if not answer.strip():
            raise self.err(
                row, "answer", "empty string" if not answer else "whitespace-only string"
            )
        context_k = rec.get("context_k")
        if context_k is not None and (
            not isinstance(context_k, int) or isinstance(context_k, bool) or context_k < 0
        ):
            raise self.err(
                row, "context_k", f"expected an integer >= 0, got {_describe(context_k)}"
            )
        claims = rec.get("claims")
        if claims is not None:
            if not isinstance(claims, list):
                raise self.err(
                    row, "claims", f"expected a list of strings, got {_describe(claims)}"
                )
            for j, c in enumerate(claims):
                if not isinstance(c, str) or not c.strip():
                    raise self.err(
                        row, f"claims[{j}]", f"expected a non-empty string, got {_describe(c)}"
                    )
            claims = list(claims)
        if "retrieved" not in rec:
            raise self.err(row, "retrieved", "missing (give [] when nothing was retrieved)")
        items = rec["retrieved"]
        if not isinstance(items, list):
            raise self.err(row, "retrieved", f"expected a list, got {_describe(items)}")

        resolved = [self.item(row, j, it) for j, it in enumerate(items)]
        flags = [r[4] for r in resolved]
        given = [f is not None for f in flags]
        if any(given) and not all(given):
            j = given.index(False)
            raise self.err(
                row,
                f"retrieved[{j}].in_context",
                "missing: when some retrieved items give in_context, all must",
            )
        k = self.default_k if context_k is None else context_k
        for j, (cid, d, s, e, flag, score) in enumerate(resolved):
            rank = j + 1
            if flag is not None and context_k is not None and flag != (rank <= context_k):
                raise self.err(
                    row,
                    f"retrieved[{j}].in_context",
                    f"in_context={flag} contradicts context_k={context_k} at rank {rank}",
                )
            r = self.ret
            r["run"].append(self.run)
            r["question_id"].append(qid)
            r["rank"].append(rank)
            r["chunk_id"].append(cid)
            r["doc_id"].append(d)
            r["char_start"].append(s)
            r["char_end"].append(e)
            r["score"].append(score)
            r["in_context"].append(flag if flag is not None else rank <= k)
            self.ret_rows.append(row)
        a = self.answers
        a["run"].append(self.run)
        a["question_id"].append(qid)
        a["answer"].append(answer)
        a["claims"].append(claims)
        self.answer_rows.append(row)

    def item(
        self, row: int, j: int, it: Any
    ) -> tuple[str, str, int, int, bool | None, float | None]:
        f = f"retrieved[{j}]"
        rank = f"rank {j + 1}"
        if not isinstance(it, dict):
            raise self.err(row, f, f"expected an object ({rank}), got {_describe(it)}")
        for key in it:
            if key not in _ITEM_KEYS:
                raise self.err(
                    row,
                    f"{f}.{key}",
                    f"unknown key in a retrieved item ({rank}); items are one of {', '.join(ITEM_FORMS)}"
                    " with optional 'score', 'in_context'",
                )
        score = it.get("score")
        if score is not None:
            if isinstance(score, bool) or not isinstance(score, (int, float)):
                raise self.err(
                    row, f"{f}.score", f"expected a number ({rank}), got {_describe(score)}"
                )
            try:
                score = float(score)
            except OverflowError:  # an integer beyond the float range
                score = math.inf
            if not math.isfinite(score):
                raise self.err(
                    row, f"{f}.score", f"expected a finite number ({rank}), got {score}"
                )
        flag = it.get("in_context")
        if flag is not None and not isinstance(flag, bool):
            raise self.err(
                row, f"{f}.in_context", f"expected true or false ({rank}), got {_describe(flag)}"
            )

        keys = set(it) - ITEM_OPTIONAL_KEYS
        if keys == {"chunk_id"}:
            cid = it["chunk_id"]
            if not isinstance(cid, str):
                raise self.err(
                    row, f"{f}.chunk_id", f"expected a string ({rank}), got {_describe(cid)}"
                )
            hit = self.chunk.get(cid)
            if hit is None:
                raise self.err(row, f"{f}.chunk_id", f"unknown chunk_id {cid!r} ({rank})")
            return (cid, *hit, flag, score)
        if keys == {"doc_id", "char_start", "char_end"}:
            d = self.doc_id(row, f, rank, it["doc_id"])
            s, e = it["char_start"], it["char_end"]
            for name, v in (("char_start", s), ("char_end", e)):
                if not isinstance(v, int) or isinstance(v, bool):
                    raise self.err(
                        row, f"{f}.{name}", f"expected an integer ({rank}), got {_describe(v)}"
                    )
            n = self.doc_len[d]
            if not 0 <= s < e <= n:
                field = "char_end" if 0 <= s < n else "char_start"
                raise self.err(
                    row,
                    f"{f}.{field}",
                    f"offsets [{s}, {e}) out of range or reversed ({rank}): document {d!r} has {n} characters",
                )
            return (self.chunk_for(d, s, e), d, s, e, flag, score)
        if keys in ({"text"}, {"text", "doc_id"}):
            d = self.doc_id(row, f, rank, it["doc_id"]) if "doc_id" in it else None
            text = it["text"]
            if not isinstance(text, str) or not text.strip():
                raise self.err(
                    row, f"{f}.text", f"expected a non-empty string ({rank}), got {_describe(text)}"
                )
            hit = self.index.locate(text, d)
            if hit is None:
                where = f"document {d!r}" if d is not None else "the corpus"
                raise self.err(
                    row,
                    f"{f}.text",
                    f"retrieved text not found in {where} ({rank}), "
                    "not even with whitespace normalised",
                )
            d, s, e = hit
            return (self.chunk_for(d, s, e), d, s, e, flag, score)
        raise self.err(
            row,
            f,
            f"ambiguous or incomplete item ({rank}) with keys {sorted(keys)}: "
            f"give exactly one of {', '.join(ITEM_FORMS)}",
        )

    def doc_id(self, row: int, f: str, rank: str, d: Any) -> str:
        if not isinstance(d, str):
            raise self.err(row, f"{f}.doc_id", f"expected a string ({rank}), got {_describe(d)}")
        if d not in self.doc_len:
            raise self.err(row, f"{f}.doc_id", f"unknown doc_id {d!r} ({rank})")
        return d


def load_run(
    data_dir: Path,
    run: str,
    corpus: pd.DataFrame,
    chunks: pd.DataFrame,
    questions: pd.DataFrame,
    default_context_k: int,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """runs/<run>.jsonl -> (answers, retrieved, chunks extended with the run's ad-hoc chunks)."""
    return _load_run(Path(data_dir), run, corpus, chunks, questions, default_context_k)[0]


def _load_run(
    data_dir: Path,
    run: str,
    corpus: pd.DataFrame,
    chunks: pd.DataFrame,
    questions: pd.DataFrame,
    default_context_k: int,
) -> tuple[tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame], dict[str, str]]:
    path = _run_path(data_dir, run)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(path, None, None, f"cannot read file: {exc.strerror or exc}") from None
    records, lines = _jsonl_records(path, _decode(path, raw, 0))
    if not records:
        raise InputError(path, None, None, "no records")
    b = _RunBuilder(path, run, corpus, chunks, questions, default_context_k)
    for row, rec in zip(lines, records):
        b.record(row, rec)

    answers = pd.DataFrame(
        {
            "run": pd.Series(b.answers["run"], dtype="str"),
            "question_id": pd.Series(b.answers["question_id"], dtype="str"),
            "answer": pd.Series(b.answers["answer"], dtype="str"),
            "claims": pd.Series(b.answers["claims"], dtype=object),
        }
    )
    answers = _validate_schema(Answers, answers, path, b.answer_rows)
    retrieved = _validate_schema(Retrieved, _retrieved_frame(b.ret), path, b.ret_rows)
    if b.adhoc:
        extra = pd.DataFrame(b.adhoc, columns=["chunk_id", "doc_id", "char_start", "char_end"])
        extra = extra.astype(
            {"chunk_id": "str", "doc_id": "str", "char_start": "int64", "char_end": "int64"}
        )
        chunks = pd.concat([chunks, extra], ignore_index=True)
    return (answers, retrieved, chunks), {_relpath(path, data_dir): hashlib.md5(raw).hexdigest()}


# --------------------------------------------------------------------------- workspace


# Validated inputs are kept under <state>/inputs/ at two levels: the corpus, chunks and
# questions ("base-*", keyed by the files they can be read from) and the
# whole workspace of one run ("ws-*", keyed by the base and the run file), each also by
# the loader's arguments and the code version. A key hashes the files' relative paths and
# bytes (md5: ~0.1 s for a 50 MB corpus), so a copy of the data elsewhere (a CI clone, a
# DVC checkout) hits too, and any edit misses. Parsing and validating 100k chunks and 10k
# answers takes ~2.3 s, reading a workspace back ~0.1 s — so the flow's load task does not
# redo what the CLI just did, a re-run on unchanged files starts at once, and a changed
# run file re-reads only itself. Only valid inputs are kept; the INPUT_CACHE_KEEP most
# recent of each level.
INPUT_CACHE_KEEP = 3


def _content_digest(h: Any, data_dir: Path, paths: list[Path]) -> str:
    for path in paths:
        h.update(path.relative_to(data_dir).as_posix().encode() + b"\x00")
        with open(path, "rb") as f:
            h.update(hashlib.file_digest(f, "md5").digest())
    return h.hexdigest()[:32]


def _input_keys(data_dir: Path, run: str | None, base_args: tuple, run_args: tuple) -> tuple[str, str]:
    from ragspan.tasks.config import code_version

    # What the loader can read: the three tables in any form, and a corpus/ folder.
    tables = [data_dir / f"{stem}{suffix}" for stem in ("corpus", "chunks", "questions") for suffix in TABLE_SUFFIXES]
    folder = sorted(p for p in (data_dir / "corpus").rglob("*") if p.is_file()) if (data_dir / "corpus").is_dir() else []
    base = _content_digest(hashlib.sha256(repr((base_args, code_version())).encode()), data_dir,
                           [p for p in tables if p.is_file()] + folder)
    run_file = data_dir / "runs" / f"{run}.jsonl"
    whole = _content_digest(hashlib.sha256(repr((base, run, run_args)).encode()), data_dir,
                            [run_file] if run and run_file.is_file() else [])
    return base, whole


def _cached(path: Path) -> Any:
    try:
        with open(path, "rb") as f:
            value = pickle.load(f)
    except Exception:  # noqa: BLE001 — missing, truncated or from another pandas: read the files instead
        return None
    os.utime(path)  # recently used: kept by the pruning in _keep
    return value


def _keep(path: Path, value: Any) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        level = path.name.split("-", 1)[0]
        kept = sorted(path.parent.glob(f"{level}-*.pickle"), key=lambda p: p.stat().st_mtime, reverse=True)
        for stale in kept[INPUT_CACHE_KEEP:]:
            stale.unlink(missing_ok=True)
    except OSError:  # a read-only state dir only costs the next load a full read
        pass


def load_workspace(
    data_dir: str | Path,
    run: str | None,
    chunk_size: int,
    chunk_overlap: int,
    default_context_k: int,
) -> Workspace:
    """Load and validate everything one evaluation needs; the first problem raises InputError.
    Unchanged files are served from the validated-inputs cache (see INPUT_CACHE_KEEP)."""
    from ragspan.tasks.config import state_dir

    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise InputError(data_dir, None, None, "data directory not found")
    root = state_dir() / "inputs"
    base_key, ws_key = _input_keys(data_dir, run, (chunk_size, chunk_overlap), (default_context_k,))
    ws = _cached(root / f"ws-{ws_key}.pickle")
    if isinstance(ws, Workspace):
        return dataclasses.replace(ws, data_dir=data_dir)
    base = _cached(root / f"base-{base_key}.pickle")
    if not (isinstance(base, tuple) and len(base) == 4):
        base = _read_base(data_dir, chunk_size, chunk_overlap)
        _keep(root / f"base-{base_key}.pickle", base)
    ws = _read_workspace(data_dir, run, default_context_k, *base)
    _keep(root / f"ws-{ws_key}.pickle", ws)
    return ws


def _read_base(data_dir: Path, chunk_size: int, chunk_overlap: int
               ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """corpus, chunks, questions and their files' md5s: what every run of a data dir shares."""
    files: dict[str, str] = {}
    corpus, h = load_corpus(data_dir)
    files.update(h)
    chunks, h = _load_chunks(data_dir, corpus, chunk_size, chunk_overlap)
    files.update(h)
    questions, h = _load_questions(data_dir)
    files.update(h)
    return corpus, chunks, questions, files


def _read_workspace(data_dir: Path, run: str | None, default_context_k: int, corpus: pd.DataFrame,
                    chunks: pd.DataFrame, questions: pd.DataFrame, base_files: dict[str, str]) -> Workspace:
    files = dict(base_files)
    if run is None:
        answers, retrieved = _empty_answers(), _retrieved_frame({k: [] for k in _RETRIEVED_COLS})
    else:
        (answers, retrieved, chunks), h = _load_run(
            data_dir, run, corpus, chunks, questions, default_context_k
        )
        files.update(h)
    return Workspace(
        data_dir=data_dir,
        run=run,
        corpus=corpus,
        chunks=chunks,
        questions=questions,
        answers=answers,
        retrieved=retrieved,
        input_files=dict(sorted(files.items())),
    )


# Not cached: reading and validating the files is the point (and it is cheap).
@task(name="load", cache_policy=NO_CACHE)
def load_inputs(data_dir: str | Path, run: str | None, settings: Settings) -> Workspace:
    return load_workspace(data_dir, run, settings.chunking.size, settings.chunking.overlap,
                          settings.pipeline.default_context_k)
