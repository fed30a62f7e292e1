"""What a file is, by its first bytes, before an importer reads it as text.

Every importer reads text (JSON, JSONL, CSV) and some read Parquet; a file in any other
format (gzip, a zip, an Excel workbook, a SQLite database, …) stops with one line naming
the format found and the formats the importer takes — rather than a "not valid UTF-8"
error that reads as if the file were broken. Nothing is written.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pandas as pd
from ragspan.tasks.errors import InputError

PARQUET = "Parquet"
# (magic bytes at offset 0, the format's name); the first match wins.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"PAR1", PARQUET),
    (b"\x1f\x8b", "gzip"),
    (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip"),
    (b"SQLite format 3\x00", "SQLite database"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "Excel 97-2003 (OLE2) workbook"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"7z\xbc\xaf\x27\x1c", "7-Zip"),
    (b"%PDF-", "PDF"),
    (b"ARROW1", "Arrow IPC (Feather)"),
    (b"Obj\x01", "Avro"),
    (b"\x89HDF\r\n\x1a\n", "HDF5"),
    (b"\x93NUMPY", "NumPy array"),
    (b"\xff\xfe", "UTF-16 text"),
    (b"\xfe\xff", "UTF-16 text"),
)
# What each importer takes, as its one-line error says.
ACCEPTED = {
    "ragas": "JSONL, CSV or Parquet (RAGAS EvaluationDataset.to_jsonl / to_csv)",
    "mapping": "JSONL, CSV or Parquet",
    "openinference": "JSON spans (one object a line, objects one after another, a JSON array, OTLP/JSON) "
                     "or a span table as Parquet or CSV (Phoenix's get_spans_dataframe)",
}


def kind_of(raw: bytes) -> str | None:
    """The binary format `raw` starts with, or None for text (UTF-8 or not: decoding decides)."""
    for magic, name in _MAGIC:
        if raw.startswith(magic):
            return _zip_kind(raw) if name == "zip" else name
    if raw.startswith(b"BZh") and raw[3:4].isdigit():
        return "bzip2"
    if raw[:1] == b"\x80" and raw[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "Python pickle"
    if b"\x00" in raw[:4096]:
        return "binary data (no format recognised)"
    return None


def _zip_kind(raw: bytes) -> str:
    try:
        names = zipfile.ZipFile(io.BytesIO(raw)).namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return "zip"
    if any(n.startswith("xl/") for n in names):
        return "Excel workbook (.xlsx)"
    if any(n.startswith("word/") for n in names):
        return "Word document (.docx)"
    if "mimetype" in names and any(n.startswith("content.xml") for n in names):
        return "OpenDocument file"
    return "zip archive"


def not_read(path: Path, found: str, fmt: str, described: str | None = None) -> InputError:
    """The one-line error for a file in a format the importer `fmt` does not read; `found`
    names the format, `described` (optional) says it in full."""
    hint = " (decompress or extract it first)" if found in ("gzip", "bzip2", "xz", "zstd", "7-Zip", "zip archive") \
        else " (save it as UTF-8)" if found == "UTF-16 text" else ""
    what = described or f"{'an' if found[0] in 'AEIO' or found.startswith('HDF') else 'a'} {found} file, by its first bytes"
    return InputError(Path(path), None, None, f"{what}: `ragspan import {fmt}` reads {ACCEPTED[fmt]}{hint}")


def read_bytes(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(path, None, None, f"cannot read file: {exc.strerror or exc}") from None


def table_source(path: Path, fmt: str) -> tuple[pd.DataFrame, bool]:
    """A table importer's file (ragas, mapping) as (table, whether its cells are CSV text).
    Parquet is read as Parquet whatever the file's name; any other binary format is refused."""
    from ragspan.tasks.inputs.load.files import read_table

    path = Path(path)
    with open(path, "rb") as f:
        head = f.read(4096)
    found = kind_of(read_bytes(path) if head.startswith(b"PK") else head)  # a zip's names are at its end
    if found == PARQUET and path.suffix.lower() != ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            df = pq.read_table(path).to_pandas()
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise InputError(path, None, None, f"cannot read Parquet: {exc}") from None
        df.index = pd.Index(range(1, len(df) + 1), name="row")
        return df, False
    if found is not None and found != PARQUET:
        raise not_read(path, found, fmt)
    return read_table(path), path.suffix.lower() == ".csv"
