"""One store layer for the state dir: every store is a directory store or a SQLite store.

The state dir (tasks/state/_dirs.py) holds a dozen stores — validated inputs, corpus indexes,
the answer store, step results, the judge and verdict caches, kept report pieces, input
digests, the shard spill. Each used to carry its own copy of "write aside, seal, rename,
keep the newest N, move aside when damaged", and the copies disagreed (a full disk was
damage to one and `DiskFull` to another). Here it is written once; a store's own module
says only what it keeps (its key and its value) and asks `registered(key)` for its store.

Directory store (`DirStore`): entries are the files or directories under a root matching
a glob (dot-names never: those are writes in progress). A write is made in a `.tmp-*`
sibling, sealed (heal.seal: every file's size and checksum; heal.sealed_bytes for a file), then
renamed into place, so an entry appears whole or not at all. A read checks the seal; a
damaged entry is moved aside (`<state>/damaged/`) with one warning line and reads as
missing, so the caller rebuilds it. After a write the store keeps its newest `keep`
entries (by mtime: a read touches its entry). Leftovers of killed writers (`.tmp-*`,
`.gone-*`, older than an hour) are removed by the next writer.

SQLite store (`SqliteStore`): one file of rows, WAL journal, a busy timeout, and one
thread at a time switching a file to WAL (the init lock). `PRAGMA integrity_check` the
first time a process opens it; a damaged file is salvaged (its readable rows copied into
a fresh file: the judge cache, paid calls) or started anew (the verdict cache: every row
can be computed again), the damaged one moved aside, one warning line.

Policy for a full disk, everywhere: ENOSPC, EDQUOT or EFBIG (a file-size limit) — or for
SQLite, SQLITE_FULL and the I/O errors `_room.py` counts as no room — stop the
write with `ragspan.tasks.errors.DiskFull` naming the store, and leave the store as it was:
never discarded, never moved aside (only SQLite's own verdicts — SQLITE_CORRUPT,
SQLITE_NOTADB, integrity_check findings — are damage). A store that is only a speed-up
(validated inputs, digests, report pieces) catches `DiskFull` and carries on: the run's
own outputs then meet the full disk and say so.

`REGISTRY` names every store of the state dir: key, title, location, kind, pruned or kept.
`ragspan cache stats|clear|prune` and the pruning after a run (tasks/state/_stores.py) go by it.
Standard library only (docs/decisions.md #49).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, TypeVar

from . import _heal as heal
from . import _sqlite as sqlite_heal
from ._dirs import state_dir
from ._room import NO_SPACE, no_room, room_for  # noqa: F401 (the store layer's answer to a full disk)

T = TypeVar("T")
TMP, GONE = ".tmp-", ".gone-"  # a write in progress; an entry being removed
# What killed writers leave (older layouts' names too: .seg-*, .building-*, .snap-*, .*.tmp).
LEFTOVERS = (f"{TMP}*", f"{GONE}*", ".seg-*", ".building-*", ".snap-*", ".*.tmp")


# -- what every store reports ------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One prunable unit of a store: a file or directory, or a SQLite store's row group."""

    store: str
    path: Path  # the file or directory; for a SQLite store, the database
    key: str  # a SQLite store's entry key (a judge-cache row, a verdict-cache day), else ""
    bytes: int
    used: float  # last use, seconds since the epoch


def tree_bytes(p: Path) -> int:
    """Bytes of a file, or of every file under a directory (0 when it is gone)."""
    try:
        if not p.is_dir():
            return p.stat().st_size
    except FileNotFoundError:
        return 0
    total = 0
    for dirpath, _, files in os.walk(p):
        for f in files:
            try:
                total += os.stat(os.path.join(dirpath, f), follow_symlinks=False).st_size
            except FileNotFoundError:  # removed meanwhile by a run's own pruning
                pass
    return total


def touch(path: Path) -> None:
    """Record a use (the mtime pruning goes by); an entry removed meanwhile is no error."""
    try:
        os.utime(path)
    except OSError:
        pass


def discard(path: Path) -> None:
    """Remove an entry all at once for a reader: a directory is renamed out of sight first
    (a half-deleted one would look damaged), then deleted."""
    try:
        if not path.is_dir():
            path.unlink(missing_ok=True)
            return
        hidden = path.with_name(f"{GONE}{time.time_ns()}-{path.name}")
        os.replace(path, hidden)
    except FileNotFoundError:
        return
    except OSError:
        hidden = path
    shutil.rmtree(hidden, ignore_errors=True)


def owner_gone(path: Path) -> bool:
    """For entries named `<pid>-...` (the shard spill): the process that made it has ended."""
    pid = path.name.split("-", 1)[0]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # someone else's process: alive
        return False
    return False


# -- the directory store -------------------------------------------------------------------------


@dataclass(frozen=True)
class DirStore:
    """Entries (files or directories) under `root`; see the module docstring."""

    root: Path
    title: str  # what a healing warning and DiskFull name: "answer store segment", "corpus index"
    pattern: str = "*"  # the entries' names
    keep: int = 0  # newest entries kept after a write (0: every one)
    sealed: bool = True  # entries carry checksums, checked on read
    removable: Callable[[Path], bool] | None = None  # which entries pruning may remove (None: all)

    def path(self, name: str) -> Path:
        return self.root / name

    def within(self, name: str, **changes: object) -> DirStore:
        """The store of one entry's own entries (an answer-store context's segments)."""
        fields: dict = {"keep": 0, "pattern": "*", "removable": None, **changes}
        return replace(self, root=self.root / name, **fields)

    # -- listing --------------------------------------------------------------------------------

    def names(self) -> list[Path]:
        """The entries, by name (writes in progress and removals are dot-names: never listed)."""
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.glob(self.pattern) if not p.name.startswith("."))

    def names_by_use(self) -> list[Path]:
        """The entries, the most recently used first (a read touches its entry)."""
        return sorted(self.names(), key=_mtime, reverse=True)

    def entries(self, key: str = "") -> list[Entry]:
        out = []
        for p in self.names():
            try:
                out.append(Entry(key, p, "", tree_bytes(p), p.stat().st_mtime))
            except FileNotFoundError:
                pass
        return out

    def prunable(self, key: str = "") -> list[Entry]:
        return [e for e in self.entries(key) if self.removable is None or self.removable(e.path)]

    def bytes(self) -> int:
        return sum(tree_bytes(p) for p in self.names())

    # -- writing --------------------------------------------------------------------------------

    def write_dir(self, name: str, fill: Callable[[Path], None], *, replace: bool = True) -> Path:
        """The entry `name`, filled by `fill(directory)` aside, sealed, renamed into place.
        `replace=False`: an entry already there (another process won the race: the same
        content) is kept and this one dropped. No room: DiskFull, the store as it was."""
        target = self.path(name)
        with room_for(target, self.root, self.title):
            self.root.mkdir(parents=True, exist_ok=True)
            self.remove_leftovers()
            tmp = Path(tempfile.mkdtemp(prefix=TMP, dir=self.root))
        try:
            with room_for(target, self.root, self.title, needed=lambda: tree_bytes(tmp)):
                fill(tmp)
                if self.sealed:
                    heal.seal(tmp)
            self._swap(tmp, target, replace)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        self.keep_newest()
        return target

    def _swap(self, tmp: Path, target: Path, replace: bool) -> None:
        if replace and target.exists():
            discard(target)
        try:
            os.replace(tmp, target)
        except OSError:  # a non-empty directory there: another process won the race
            if replace:
                raise

    def write_file(self, name: str, payload: bytes) -> Path:
        """The entry `name` with `payload` (behind its checksum header when sealed): written
        aside, then renamed. No room: DiskFull, the previous entry as it was."""
        target = self.path(name)
        tmp = self.path(f"{TMP}{name}-{os.getpid()}-{threading.get_ident()}")
        try:
            with room_for(target, self.root, self.title):
                self.root.mkdir(parents=True, exist_ok=True)
                with open(tmp, "wb") as f:
                    f.write(heal.sealed_bytes(payload) if self.sealed else payload)
                os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        self.remove_leftovers()
        self.keep_newest()
        return target

    def keep_newest(self, n: int | None = None, pattern: str | None = None) -> None:
        """Only the `n` (default: keep) most recently used entries matching `pattern` stay."""
        n = self.keep if n is None else n
        if n <= 0:
            return
        found = [p for p in self.root.glob(pattern or self.pattern) if not p.name.startswith(".")] \
            if self.root.is_dir() else []
        by_use = sorted(found, key=_mtime, reverse=True)
        for stale in by_use[n:]:
            discard(stale)

    def remove_leftovers(self) -> None:
        for pattern in LEFTOVERS:
            heal.remove_leftovers(self.root, pattern)

    # -- reading --------------------------------------------------------------------------------

    def read_file(self, name: str, parse: Callable[[bytes], T], action: str | None, *,
                  mark: bool = True) -> T | None:
        """`parse(payload)` of the entry `name`, or None: missing, or damaged — a checksum
        that does not match, or `parse` failing. Damaged: moved aside with one warning line
        saying `action` (None: read as missing, in silence, and written anew)."""
        path = self.path(name)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._damaged(path, f"{type(exc).__name__}: {exc}", action)
            return None
        try:
            value = parse(heal.unsealed(blob) if self.sealed else blob)
        except Exception as exc:  # noqa: BLE001 — whatever the damage, the store rebuilds it
            text = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
            self._damaged(path, text, action)
            return None
        if mark:
            touch(path)
        return value

    def checked_dir(self, name: str, action: str, check: Callable[[Path], str | None] | None = None, *,
                    mark: bool = True) -> Path | None:
        """The entry directory `name` when its seal (and `check`, when given) find nothing
        wrong; None when it is missing, or damaged: moved aside with one warning line."""
        path = self.path(name)
        if not path.is_dir():
            return None
        problem = heal.check_sealed(path) if self.sealed else None
        if problem is None and check is not None:
            problem = check(path)
        if problem is None:
            if mark:
                touch(path)
            return path
        self.heal(path, problem, action)
        return None

    def heal(self, path: Path, problem: str, action: str) -> None:
        """Move the damaged entry aside (`<state>/damaged/`), one warning line."""
        if path.exists():
            heal.heal(path, self.title, problem, action)

    def _damaged(self, path: Path, problem: str, action: str | None) -> None:
        if action is not None:
            self.heal(path, problem, action)

    def clear(self, key: str = "") -> list[Entry]:
        """Remove every removable entry; what they were."""
        gone = self.prunable(key)
        for e in gone:
            discard(e.path)
        return gone


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except FileNotFoundError:
        return 0.0


# -- the SQLite store ----------------------------------------------------------------------------

_INIT_LOCK = threading.Lock()  # one thread at a time switches a file to WAL and sets it up
BUSY_TIMEOUT_MS = 60_000
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26


def is_damage(exc: sqlite3.Error) -> bool:
    """SQLite's own verdict that the file is damaged (never a lock, an I/O error or no room)."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    return code in (_SQLITE_CORRUPT, _SQLITE_NOTADB)


@dataclass(frozen=True)
class SqliteStore:
    """One SQLite file of rows; see the module docstring. `entries_sql` lists its prunable
    entries as (key, last used, weight: its share of the file's bytes); `delete_sql`
    removes one entry by key; `clear_sql` every entry."""

    path: Path
    title: str  # "judge cache": what warnings and DiskFull name
    schema: str
    tables: tuple[str, ...]  # the rows a salvage copies (the first one counted)
    salvage: bool  # damaged: keep every readable row (True) or start anew (False)
    action: str  # what the warning line says happens to the lost rows
    entries_sql: str
    delete_sql: str
    clear_sql: str

    # -- opening -------------------------------------------------------------------------------

    def connect(self) -> sqlite3.Connection:
        """A connection in autocommit mode (explicit transactions), WAL, busy timeout, schema
        in place; the file checked once per process first. No room even to open: DiskFull."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.check_once()
        with self.writing():
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                   check_same_thread=False)
            try:
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                self._set_up(conn)
            except BaseException:
                conn.close()
                raise
        return conn

    def _set_up(self, conn: sqlite3.Connection) -> None:
        """WAL mode and the schema. Switching to WAL takes an exclusive lock that the busy
        timeout does not cover, so two threads or processes opening a new file at once can
        see "database is locked": serialise threads, retry across processes."""
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        with _INIT_LOCK:
            while True:
                try:
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.execute("PRAGMA synchronous = NORMAL")
                    conn.executescript(self.schema)
                    return
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """SQLite work on the file: a refusal for want of room is DiskFull naming it (the
        transaction was rolled back: the store is as it was)."""
        with room_for(self.path, self.path.parent, self.title):
            yield

    # -- healing -------------------------------------------------------------------------------

    def check_once(self) -> None:
        """integrity_check the first time this process opens the file; damaged: healed
        (salvaged or started anew, as the store says)."""
        sqlite_heal.check_once(self.path, self.title, self.action, (self.schema, self.tables) if self.salvage else None)

    def start_anew(self, problem: str) -> None:
        """Move the damaged file aside; the next connect creates it empty."""
        sqlite_heal.replace_damaged(self.path, self.title, problem, self.action)

    def healing(self, work: Callable[[], T]) -> T:
        """`work()`, once more after healing the file when SQLite finds it damaged midway
        (a rebuildable store only; a salvaged one is checked on open). No room is DiskFull,
        a lock or any other error passes through: neither is damage."""
        try:
            return work()
        except sqlite3.DatabaseError as exc:
            if self.salvage or not is_damage(exc) or not self.path.exists():
                raise
            self.start_anew(f"{type(exc).__name__}: {exc}")
        return work()

    # -- the registry's questions --------------------------------------------------------------

    def files(self) -> list[Path]:
        """The database and its journals."""
        where = self.path.parent
        return [p for p in where.glob(self.path.name + "*") if p.is_file() and not p.name.endswith("-lock")] \
            if where.is_dir() else []

    def bytes(self) -> int:
        return sum(tree_bytes(p) for p in self.files())

    def entries(self, key: str = "") -> list[Entry]:
        """One entry per `entries_sql` row, the file's size shared out by their weights."""
        if not self.path.is_file():
            return []
        conn = self.connect()  # checked once per process; a damaged file healed first
        try:
            rows = conn.execute(self.entries_sql).fetchall()
        finally:
            conn.close()
        size = self.bytes()
        weight = sum(r[2] for r in rows) or 1
        return [Entry(key, self.path, str(k), int(size * w / weight), float(t)) for k, t, w in rows]

    def prunable(self, key: str = "") -> list[Entry]:
        return self.entries(key)

    def count(self) -> int:
        """How many entries `entries` lists, counted by SQLite (no row read into Python): the
        one count of a SQLite store (`cache stats`, `len()` of the judge cache)."""
        if not self.path.is_file():
            return 0
        conn = self.connect()
        try:
            return int(conn.execute(f"SELECT COUNT(*) FROM ({self.entries_sql})").fetchone()[0])
        finally:
            conn.close()

    def delete(self, keys: list[str] | None) -> None:
        """Delete entries (`keys`, or every one for None) and give the space back."""
        if not self.path.is_file():
            return
        conn = self.connect()
        try:
            with self.writing():
                conn.execute("BEGIN IMMEDIATE")
                if keys is None:
                    conn.execute(self.clear_sql)
                else:
                    conn.executemany(self.delete_sql, [(k,) for k in keys])
                conn.execute("COMMIT")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                conn.execute("VACUUM")
        finally:
            conn.close()

    def clear(self, key: str = "") -> list[Entry]:
        gone = self.entries(key)
        if gone:
            self.delete(None)
        return gone


# -- the registry ----------------------------------------------------------------------------------

Kind = Literal["sqlite", "dirs", "files"]


@dataclass(frozen=True)
class Registered:
    """One store of the state dir, as `ragspan cache` and pruning know it."""

    key: str  # the name in `cache stats --json`
    title: str  # the name in `cache stats`, `clear` and `prune` lines
    where: str  # under the state dir (the step results: Prefect's setting, tasks/supervision/runtime.py)
    kind: Kind  # sqlite: entries are rows of one file; dirs / files: entries under a directory
    pruned: bool  # a cache (pruned, cleared) or kept (listed only)
    pattern: str = "*"  # dirs / files: the entries' names
    keep: int = 0  # dirs / files: newest entries a write keeps (0: every one)
    sealed: bool = True
    removable: Callable[[Path], bool] | None = None
    entry_title: str = ""  # what a healing warning and DiskFull name, when not the title

    def location(self, root: Path | None = None) -> Path:
        return (root or state_dir()) / self.where


REGISTRY: dict[str, Registered] = {r.key: r for r in (
    Registered("judge_cache", "judge cache", "judge-cache.sqlite", "sqlite", True),
    Registered("verdict_cache", "verdict cache", "verdict-cache.sqlite", "sqlite", True),
    Registered("answer_store", "answer store", "answers", "dirs", True, keep=8, entry_title="answer store segment"),
    Registered("inputs", "validated inputs", "inputs", "files", True, pattern="*.pickle",
               entry_title="validated-inputs cache entry"),
    Registered("step_results", "step results", "prefect/results", "files", True, sealed=False,
               entry_title="step result"),
    Registered("corpus", "corpus store", "corpus", "dirs", True, keep=3, entry_title="corpus store entry"),
    Registered("indexes", "corpus indexes", "index", "dirs", True, entry_title="corpus index"),
    Registered("reports", "report pieces", "reports", "dirs", True, keep=3, entry_title="report snapshot"),
    Registered("digests", "input digests", ".", "files", True, pattern="digests.json", sealed=False),
    Registered("spill", "shard spill", "spill", "dirs", True, sealed=False, removable=owner_gone,
               entry_title="shard results"),
    Registered("demo_indexes", "demo indexes", "demo-index", "dirs", False),
    Registered("prefect_db", "prefect database", "prefect", "files", False, pattern="*.db*", sealed=False),
)}


def store_path(key: str) -> Path:
    """Where the store registered as `key` lives in the state dir (RAGSPAN_HOME)."""
    return REGISTRY[key].location()


def dir_store(key: str, root: Path | None = None) -> DirStore:
    """The directory store registered as `key`, at `root` (default: its place in the state dir)."""
    r = REGISTRY[key]
    if r.kind == "sqlite":
        raise ValueError(f"{key} is a SQLite store")
    return DirStore(root if root is not None else r.location(), r.entry_title or r.title, r.pattern, r.keep,
                    r.sealed, r.removable)


# How each SQLite store opens (its schema, its salvage rule): given by the room that owns the
# schema when its module is imported (tasks/judges/cache.py, tasks/judges/verdict_cache.py),
# so the state room never imports upward.
_SQLITE_OPENERS: dict[str, Callable[[Path], SqliteStore]] = {}


def register_sqlite(key: str, opener: Callable[[Path], SqliteStore]) -> None:
    """Say how the SQLite store registered as `key` opens at a path."""
    if REGISTRY[key].kind != "sqlite":
        raise ValueError(f"{key} is not a SQLite store")
    _SQLITE_OPENERS[key] = opener


def sqlite_store(key: str, path: Path | None = None) -> SqliteStore:
    """The SQLite store registered as `key`, at `path` (default: its place in the state dir)."""
    r = REGISTRY[key]
    opener = _SQLITE_OPENERS.get(key)
    if opener is None:
        raise LookupError(f"the {r.title} has no opener: import ragspan.tasks.judges, whose caches register theirs")
    return opener(path or r.location())


def registered(key: str, where: Path | None = None) -> DirStore | SqliteStore:
    """Store `key` at `where` (default: its place in the state dir)."""
    return sqlite_store(key, where) if REGISTRY[key].kind == "sqlite" else dir_store(key, where)
