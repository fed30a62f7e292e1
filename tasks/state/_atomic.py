"""Atomic writes: a results directory appears whole or not at all.

Everything is written into a fresh sibling temp directory, fsynced, then swapped in
with renames; a crash leaves either the previous results or the new ones, plus at
most a `.tmp-*` directory that the next run removes. A full disk (or a file-size
limit) while writing is `DiskFull`, naming the file: the previous results stay.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ragspan.tasks.errors import OutputBusy

from . import _store as store
from ._dirs import state_dir
from ._locks import file_lock

if TYPE_CHECKING:
    import pandas as pd


def write_atomic_dir(out_dir: Path, writers: dict[str, Callable[[Path], None]]) -> Path:
    """Call each writer with a path inside a temp dir, then swap the dir into place."""
    out_dir = out_dir.resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.parent.glob(f".{out_dir.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    with room_for(out_dir.parent, out_dir):
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    # mkdtemp makes the directory 0700; the results are for a team (or a web server) to
    # read, so they get the mode any new directory would get under the process's umask.
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        for name, write in writers.items():
            with room_for(out_dir / name, out_dir, needed=lambda: _needed(tmp, out_dir)):  # named as the file
                write(tmp / name)
                if (tmp / name).is_file():  # a writer may also produce a directory (an index)
                    with open(tmp / name, "rb") as fh:
                        os.fsync(fh.fileno())
        old = out_dir.parent / f".{out_dir.name}.tmp-old"
        if out_dir.is_dir():
            # Keep what others put there: DVC's .gitignore for the outs in this directory.
            for hidden in out_dir.glob(".*"):
                if hidden.is_file() and hidden.name not in writers:
                    with room_for(hidden, out_dir):
                        shutil.copy2(hidden, tmp / hidden.name)
        if out_dir.exists():
            os.replace(out_dir, old)
        os.replace(tmp, out_dir)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def _tree_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else 0


def _needed(tmp: Path, out_dir: Path) -> int:
    """What the new results need at least: what was written before the failure, or the
    previous results' size when larger (a new run's results are about as big)."""
    try:
        return max(_tree_bytes(tmp), _tree_bytes(out_dir))
    except OSError:
        return 0


def room_for(path: Path, out_dir: Path, what: str = "results",
             needed: Callable[[], int] | None = None) -> AbstractContextManager[None]:
    """An OSError for want of room becomes DiskFull naming `path` (and what the write
    needs, when `needed` can tell): the store layer's rule (tasks/state/_store.py), for results."""
    return store.room_for(path, out_dir, what, needed)


no_room = store.no_room  # the errno of a failure for want of room, else 0


def _umask() -> int:
    """The process's umask (reading it means setting it; it is put straight back)."""
    current = os.umask(0o022)
    os.umask(current)
    return current


@contextmanager
def output_lock(out_dir: Path) -> Iterator[None]:
    """Hold an exclusive lock on `out_dir` for a whole run; refuse (don't wait) if taken.

    The lock file lives in the state dir (keyed by the absolute path), not next to the
    outputs, so results directories stay clean. flock is released by the kernel if the
    process dies, so a killed run never leaves a stale lock."""

    target = str(Path(out_dir).resolve())
    path = state_dir() / "locks" / (hashlib.sha256(target.encode()).hexdigest()[:24] + ".lock")
    with file_lock(path, wait=False, open_mode="a+") as fh:
        if fh is None:
            with open(path, encoding="utf-8") as held:
                holder = held.read().strip() or "another process"
            raise OutputBusy(f"{target}: another ragspan evaluate is writing here ({holder}); "
                             "wait for it or choose another --out")
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}")
        fh.flush()
        yield


def write_parquet_pieces(path: Path, pieces: Iterable[pd.DataFrame]) -> int:
    """One Parquet file from a table's consecutive pieces, a row group each (empty pieces
    skipped), holding one piece at a time; its rows counted. A table that comes in one
    piece is written as `DataFrame.to_parquet` writes it, byte for byte; a table with
    none is the concatenation of its empty pieces (their dtypes, as pd.concat gives them).
    Every row group takes the first piece's Arrow schema (pandas metadata included), so
    the file reads back as the concatenated pieces would."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer: pq.ParquetWriter | None = None
    empties: list[pd.DataFrame] = []
    rows = 0
    try:
        for piece in pieces:
            if not len(piece):
                if writer is None:
                    empties.append(piece)
                continue
            if writer is None:
                table = pa.Table.from_pandas(piece, preserve_index=False)
                writer = pq.ParquetWriter(path, table.schema, compression="snappy")
            else:
                if list(piece.columns) != writer.schema.names:  # from_pandas would drop or miss some
                    raise ValueError(f"{path}: a piece's columns {list(piece.columns)} are not the "
                                     f"first piece's {writer.schema.names}")
                table = pa.Table.from_pandas(piece, schema=writer.schema, preserve_index=False)
            writer.write_table(table)
            rows += len(piece)
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        if not empties:
            raise ValueError(f"{path}: a table needs at least one piece, even an empty one")
        (pd.concat(empties, ignore_index=True) if len(empties) > 1 else empties[0]).to_parquet(path, index=False)
    return rows
