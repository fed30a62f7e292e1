"""SQLite healing for the store layer (tasks/state/_store.py `SqliteStore`): what counts as
damage, the salvage of a store that cannot be rebuilt, and what counts as no room.

A store that cannot be rebuilt (the judge cache: paid model answers) is checked like
the others, but healed by salvage rather than rebuilt: `PRAGMA integrity_check` when it
is first opened in a process; a damaged file has every row that can still be read copied
into a fresh database, which replaces it (the damaged one is moved aside). What could not
be read is asked again, and the warning line counts it. A full disk is never damage
(`no_room`): the store layer turns it into DiskFull. Standard library only."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

from . import _heal as heal
from ._locks import file_lock
from ._room import room_for

_CHECKED: set[str] = set()  # databases this process has checked (once per process)
_LOCK = threading.Lock()
_BATCH = 256  # rows read at a time; a batch that fails is read row by row


_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26  # the only errors that say the file itself is damaged


def problem_of(path: Path) -> str | None:
    """Why the database is damaged, or None: sound, not there yet, or not checkable now.
    Only SQLite's own verdicts count — integrity_check's findings, SQLITE_CORRUPT,
    SQLITE_NOTADB. An I/O error, a full disk, a file-size limit or a lock says nothing
    about the file: it is never taken for damage (salvaging then would throw paid rows away)."""
    if not path.exists():
        return None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
        try:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        return str(exc) if code is not None and code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB) else None
    found = [r[0] for r in rows]
    return None if found == ["ok"] else "integrity_check: " + "; ".join(found)[:160]


def _rows(conn: sqlite3.Connection, table: str) -> tuple[list[tuple], int]:
    """The rows of `table` that can be read, and how many could not (by rowid)."""
    try:
        top = conn.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0] or 0
    except sqlite3.DatabaseError:
        top = None
    if top is None:  # not even the table's last row: whatever a plain scan gives
        try:
            return conn.execute(f"SELECT * FROM {table}").fetchall(), 0
        except sqlite3.DatabaseError:
            return [], 0
    kept: list[tuple] = []
    lost = 0
    for lo in range(1, top + 1, _BATCH):
        hi = min(top, lo + _BATCH - 1)
        try:
            kept += conn.execute(f"SELECT * FROM {table} WHERE rowid BETWEEN ? AND ?", (lo, hi)).fetchall()
            continue
        except sqlite3.DatabaseError:
            pass
        for rowid in range(lo, hi + 1):
            try:
                kept += conn.execute(f"SELECT * FROM {table} WHERE rowid = ?", (rowid,)).fetchall()
            except sqlite3.DatabaseError:
                lost += 1
    return kept, lost


def salvage(path: Path, schema: str, tables: tuple[str, ...]) -> tuple[int, int, Path]:
    """Copy every readable row of `tables` into a fresh database with `schema`, written
    aside and renamed over `path`. Returns (rows kept, rows lost, the fresh file)."""
    fresh = path.with_name(f".{path.name}.salvage-{os.getpid()}")
    for p in (fresh, Path(f"{fresh}-journal")):
        p.unlink(missing_ok=True)
    kept = lost = 0
    out = sqlite3.connect(fresh)
    try:
        out.executescript(schema)
        try:
            src = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
        except sqlite3.DatabaseError:
            src = None
        if src is not None:
            try:
                for table in tables:
                    try:
                        rows, missed = _rows(src, table)
                    except sqlite3.DatabaseError:  # not even the schema
                        rows, missed = [], 0
                    if rows:
                        marks = ",".join("?" * len(rows[0]))
                        out.executemany(f"INSERT OR IGNORE INTO {table} VALUES ({marks})", rows)
                    if table == tables[0]:
                        kept, lost = len(rows), missed
            finally:
                src.close()
        out.commit()
    finally:
        out.close()
    return kept, lost, fresh


def first_time(path: Path) -> bool:
    """True the first time this process asks about `path` (its integrity check is due)."""
    key = str(path.resolve())
    with _LOCK:
        if key in _CHECKED:
            return False
        _CHECKED.add(key)
        return True


def check_once(path: Path, store: str, action: str, salvaged: tuple[str, tuple[str, ...]] | None) -> None:
    """Check `path` the first time this process opens it; a damaged database is replaced
    (replace_damaged), `salvaged` = (schema, tables) keeping its readable rows."""
    if first_time(path) and (problem := problem_of(path)) is not None:
        replace_damaged(path, store, problem, action, salvaged)


def replace_damaged(path: Path, store: str, problem: str, action: str,
                    salvaged: tuple[str, tuple[str, ...]] | None = None) -> None:
    """The one way a damaged SQLite store heals. Under the repair lock (two processes do it
    once): the file is moved aside with its journals (never replayed into the new file) and
    replaced by a copy of its readable rows when `salvaged` = (schema, tables) is given — no
    room for that copy is DiskFull and the file stays as it is — else by nothing (the next
    connect creates it empty). One warning line."""
    fresh: Path | None = None
    with file_lock(path.with_name(path.name + ".repair-lock")):
        if salvaged is not None:
            if problem_of(path) is None:  # another process salvaged it meanwhile
                return
            with room_for(path, path.parent, store):
                kept, lost, fresh = salvage(path, *salvaged)
        elif not path.exists():
            return
        moved = heal.move_aside(path, store)
        for side in ("-wal", "-shm"):  # they belong to the damaged file
            Path(f"{path}{side}").unlink(missing_ok=True)
        if fresh is not None:
            os.replace(fresh, path)
    if salvaged is None:
        where = f"moved aside to {moved}" if moved else "already moved aside"
        heal.warn(store, path, problem, f"{where}; {action}")
        return
    lost_note = f"{lost} unreadable" if lost else "the unreadable rest"
    heal.warn(store, path, problem, f"moved aside to {moved}; kept {kept} readable entries, {lost_note} "
              "will be asked again (counted in the judge calls of run.json)")
