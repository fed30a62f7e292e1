"""Row streams of a scale workspace's tables (corpus, chunks), JSONL or Parquet: written as
they are made and read back a batch at a time, so a 10M-chunk workspace never sits whole in
memory (issue 34 item 5).

    with table_writer(ws / "corpus.parquet") as w:
        w.write({"doc_id": "doc0", "text": "...", "doc_type": "wiki"})
    for row in iter_rows(ws / "corpus.parquet"): ...

JSONL rows are `json.dumps(row, ensure_ascii=False)` lines (the bytes the generator always
wrote); Parquet files are written by `pyarrow.parquet.ParquetWriter` in row groups of
`ROW_GROUP` rows, the schema taken from the first group.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Self

FORMATS = ("jsonl", "parquet")
ROW_GROUP = 50_000  # rows per Parquet row group: ~120 MB of corpus text at most in a batch


def table_path(ws: Path, stem: str) -> Path:
    """`ws/<stem>.jsonl` or `ws/<stem>.parquet`, whichever the workspace has (JSONL if neither)."""
    parquet = ws / f"{stem}.parquet"
    return parquet if parquet.exists() else ws / f"{stem}.jsonl"


def workspace_format(ws: Path) -> str:
    return table_path(ws, "corpus").suffix.lstrip(".")


class TableWriter:
    """Rows to one file as they come: JSONL lines, or Parquet row groups of ROW_GROUP rows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.parquet = path.suffix == ".parquet"
        self.rows = 0
        self._batch: list[dict] = []
        self._pq: Any = None  # pyarrow.parquet.ParquetWriter, opened on the first row group
        # open for the writer's life, closed by close() / the with block
        self._fh: IO[str] | None = None if self.parquet else open(path, "w", encoding="utf-8")  # noqa: SIM115

    def write(self, row: dict) -> None:
        self.rows += 1
        if self._fh is not None:
            self._fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            return
        self._batch.append(row)
        if len(self._batch) >= ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self._batch:
            return
        if self._pq is None:
            table = pa.Table.from_pylist(self._batch)
            self._pq = pq.ParquetWriter(self.path, table.schema)
        else:
            table = pa.Table.from_pylist(self._batch, schema=self._pq.schema)
        self._pq.write_table(table)
        self._batch = []

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            return
        self._flush()
        if self._pq is not None:
            self._pq.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_rows(path: Path) -> Iterator[dict]:
    """The file's rows in order, one batch in memory at a time."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches(batch_size=ROW_GROUP):
            yield from batch.to_pylist()
        return
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def count_rows(path: Path) -> int:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())
