"""SQLite healing for the store layer (tasks/state/_store.py `SqliteStore`): what counts as
damage, the salvage of a store that cannot be rebuilt, and what counts as no room.

A store that cannot be rebuilt (the judge cache: paid model answers) is checked like
the others, but healed by salvage rather than rebuilt: `PRAGMA integrity_check` when it
is first opened in a process; a damaged file has every row that can still be read copied
into a fresh database, which replaces it (the damaged one is moved aside). What could not
be read is asked again, and the warning line counts it. A full disk is never damage
(`no_room`): the store layer turns it into DiskFull. Standard library only."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from pathlib import Path

from . import _heal as heal

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


def check_once(path: Path, store: str, schema: str, tables: tuple[str, ...]) -> None:
    """Check `path` the first time this process opens it; a damaged database is salvaged
    (under a lock, so two processes do it once), the damaged file moved aside, one line."""
    if not first_time(path) or problem_of(path) is None:
        return
    with open(path.with_name(path.name + ".repair-lock"), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        problem = problem_of(path)  # another process may have salvaged it meanwhile
        if problem is None:
            return
        from ._store import room_for

        with room_for(path, path.parent, store):  # no room for the salvaged copy: DiskFull, the file stays as it is
            kept, lost, fresh = salvage(path, schema, tables)
        moved = heal.move_aside(path, store)
        for side in ("-wal", "-shm"):  # they belong to the damaged file
            Path(f"{path}{side}").unlink(missing_ok=True)
        os.replace(fresh, path)
    lost_note = f"{lost} unreadable" if lost else "the unreadable rest"
    heal.warn(store, path, problem, f"moved aside to {moved}; kept {kept} readable entries, {lost_note} "
              "will be asked again (counted in the judge calls of run.json)")


_SQLITE_FULL = 13
_SQLITE_IOERR = 10  # any I/O error (write, truncate, growing the -shm map, ...)


def no_room(exc: sqlite3.Error, path: Path) -> int:
    """The errno behind a failed SQLite write when it is for want of room, else 0. SQLite
    reports a full disk as SQLITE_FULL, but a file-size limit (EFBIG) only as an I/O
    error: that one counts when a limit is set or the filesystem has under 1 MB left."""
    import errno
    import resource

    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF  # the primary code
    if code == _SQLITE_FULL:
        return errno.ENOSPC
    if code == _SQLITE_IOERR:
        if resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY:
            return errno.EFBIG
        try:
            st = os.statvfs(path.parent)
        except OSError:
            return 0
        return errno.ENOSPC if st.f_bavail * st.f_frsize < 1_000_000 else 0
    return 0
