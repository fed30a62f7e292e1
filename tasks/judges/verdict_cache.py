"""The verdict cache: the local judge's verdicts reused by content, so a run after an index
rebuild judges only the (claim, passage) pairs whose text it has not judged before.

A local verdict is a pure function of the claim, the passage text, the question, whether
the claim is the whole answer, and the judge (model file and code). So each pair is keyed by
a hash of exactly those — never by chunk id, document or offsets: a passage whose text is
unchanged keeps its verdict when its chunk is renamed or moves in its document, and the
steps after extract (validate offsets, corpus search, diagnose) place it anew in the new
coordinates. docs/decisions.md #40.

One thing in a verdict row depends on the other passages judged with the claim: of a
claim's `unsupported` pairs only the most probable is marked (verifier.Verifier.rows). So
each pair is stored with the support it competes with for those marks and whether its row
holds them; an item is assembled as the verifier would have judged it whole: the winner
keeps its marks (or is judged again alone, when it was stored without them), the others
lose theirs. Results are identical to judging every pair afresh (tests/test_incremental.py).

Store: `<state>/verdict-cache.sqlite`, a SQLite store of the store layer (tasks/state/_store.py:
WAL, busy timeout, the init lock; any number of shards and processes). Rows carry the day
they were last used; pruning with the state dir (tasks/state/_stores.py) removes whole days,
least recently used first. A damaged file (integrity_check once per process, or SQLite
finding it corrupt midway) is moved aside with one warning and rebuilt: every verdict in it
can be computed again. A full disk is never damage: the write stops with `DiskFull` and the
file keeps its rows. `pipeline.reuse_verdicts: false` turns it off.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ragspan.tasks.state import REGISTRY, SqliteStore, register_sqlite

CACHE_FILE = REGISTRY["verdict_cache"].where
FORMAT = "verdicts-1"  # bump when a stored row's meaning changes
DAY_S = 86400
_BATCH = 4000  # keys per SELECT
_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    key     BLOB PRIMARY KEY,
    row     TEXT NOT NULL,
    compete REAL,
    marked  INTEGER NOT NULL,
    day     INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS verdicts_day ON verdicts (day);
"""

Item = tuple[str, list[str], str, bool]  # (claim, passages, question, whole answer)
# Fresh judging: rows per item and, per pair, the support it competes with for the marks.
Judged = tuple[list[list[tuple]], list[list[float | None]]]
Fresh = Callable[[list[Item]], Judged]
_Entry = tuple[tuple, float | None, bool]  # (row, competes with, row holds its marks)

def sqlite_store(path: Path) -> SqliteStore:
    """The verdict cache at `path` as the store layer keeps it: started anew when damaged
    (every verdict can be computed again); one entry per day of last use for pruning."""
    return SqliteStore(
        path, "verdict cache", _SCHEMA, ("verdicts",), salvage=False, action="its verdicts are judged again",
        # a day's entry was last used at the latest at the end of that day, and never after now
        # (`cache stats` prints it as the last use: a time later today would be false)
        entries_sql=f"SELECT day, MIN((day + 1) * {DAY_S} - 1, CAST(strftime('%s', 'now') AS INTEGER)), COUNT(*) "
                    "FROM verdicts GROUP BY day",
        delete_sql="DELETE FROM verdicts WHERE day = ?", clear_sql="DELETE FROM verdicts")


register_sqlite("verdict_cache", sqlite_store)  # the state room opens this store by its key (cache stats, clear, prune)


def pair_keys(item: Item, judge_id: str) -> list[bytes]:
    """One 16-byte key per passage: judge, claim, question, whole-answer flag and the text."""
    claim, passages, question, whole = item
    head = hashlib.blake2b(digest_size=16)
    head.update(json.dumps([FORMAT, judge_id, claim, question, whole], ensure_ascii=False).encode())
    keys = []
    for passage in passages:
        h = head.copy()
        h.update(passage.encode("utf-8", "surrogatepass"))
        keys.append(h.digest())
    return keys


def _row_json(row: tuple) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


def _row_of(text: str) -> tuple:
    """The verifier's row tuple back from JSON (marks as tuples of tuples)."""
    row = json.loads(text)
    row[-1] = tuple(tuple(m) for m in row[-1])
    return tuple(row)


def winner(competing: Sequence[float | None]) -> int | None:
    """The pair of an item that keeps its marks: the highest support, the first on a tie
    (as verifier.Verifier.rows chooses)."""
    best: tuple[float, int] | None = None
    for j, s in enumerate(competing):
        if s is not None and (best is None or (s, -j) > best):
            best = (s, -j)
    return None if best is None else -best[1]


def without_marks(row: tuple) -> tuple:
    return (*row[:-1], ())


class VerdictCache:
    """The SQLite file of verdicts (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sqlite = sqlite_store(path)
        self._conn = self.sqlite.connect()  # checked once per process; no room: DiskFull

    def close(self) -> None:
        self._conn.close()

    def lookup(self, keys: list[bytes]) -> dict[bytes, _Entry]:
        found: dict[bytes, _Entry] = {}
        stale: list[bytes] = []
        today = int(time.time() // DAY_S)
        for lo in range(0, len(keys), _BATCH):
            part = keys[lo:lo + _BATCH]
            marks = ",".join("?" * len(part))
            for key, row, compete, marked, day in self._conn.execute(
                    f"SELECT key, row, compete, marked, day FROM verdicts WHERE key IN ({marks})", part):
                found[key] = (_row_of(row), compete, bool(marked))
                if day != today:
                    stale.append(key)
        if stale:  # last used today: what pruning by age and size goes by
            self._write("UPDATE verdicts SET day = ? WHERE key = ?", [(today, k) for k in stale])
        return found

    def store(self, entries: dict[bytes, _Entry]) -> None:
        today = int(time.time() // DAY_S)
        # in key order: neighbouring keys land on the same B-tree pages (random 16-byte keys
        # otherwise touch a page each; ~0.2 of the writes' CPU measured on 300k rows)
        self._write("INSERT OR REPLACE INTO verdicts VALUES (?,?,?,?,?)",
                    [(k, _row_json(r), c, int(m), today) for k, (r, c, m) in sorted(entries.items())])

    def _write(self, sql: str, rows: list[tuple]) -> None:
        """One transaction; refused for want of room, it is rolled back (the file keeps
        every row it had) and DiskFull is raised."""
        with self.sqlite.writing():
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.executemany(sql, rows)
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise


def rows_with_cache(items: list[Item], fresh: Fresh, judge_id: str, path: Path) -> tuple[list[list[tuple]], int, int]:
    """Verdict rows for `items` as `fresh` would give them, judging only the pairs the cache
    at `path` does not hold. Returns (rows, pairs judged, pairs judged again alone for the
    marks they win). A damaged cache is moved aside (one warning line) and started anew; a
    full disk is DiskFull, the cache keeping its file and rows (never taken for damage)."""

    def judged() -> tuple[list[list[tuple]], int, int]:
        cache = VerdictCache(path)
        try:
            return _assemble(items, fresh, judge_id, cache)
        finally:
            cache.close()

    return sqlite_store(path).healing(judged)


def _assemble(items: list[Item], fresh: Fresh, judge_id: str, cache: VerdictCache) -> tuple[list[list[tuple]], int, int]:
    keys = [pair_keys(item, judge_id) for item in items]
    known = cache.lookup([k for ks in keys for k in ks])
    # 1. the pairs never judged: judged together per claim (as before, in one batch)
    todo = [(i, [j for j, k in enumerate(ks) if k not in known]) for i, ks in enumerate(keys)]
    todo = [(i, js) for i, js in todo if js]
    judged = sum(len(js) for _, js in todo)
    new = _judge(items, todo, fresh, keys)
    known.update(new)
    # 2. a winner stored without its marks (it lost them to another pair when it was
    #    judged): judged again alone, where it wins
    again = []
    for i, ks in enumerate(keys):
        w = winner([known[k][1] for k in ks])
        if w is not None and not known[ks[w]][2]:
            again.append((i, [w]))
    if again:
        redo = _judge(items, again, fresh, keys, alone=True)
        known.update(redo)
        new.update(redo)
    if new:
        cache.store(new)
    out = []
    for ks in keys:
        w = winner([known[k][1] for k in ks])
        out.append([known[k][0] if j == w or known[k][1] is None else without_marks(known[k][0])
                    for j, k in enumerate(ks)])
    return out, judged, len(again)


def _judge(items: list[Item], todo: list[tuple[int, list[int]]], fresh: Fresh, keys: list[list[bytes]],
           alone: bool = False) -> dict[bytes, _Entry]:
    """Judge the passages `todo` names, per item together (or each alone); their entries."""
    if alone:
        todo = [(i, [j]) for i, js in todo for j in js]
    asked = [(items[i][0], [items[i][1][j] for j in js], items[i][2], items[i][3]) for i, js in todo]
    rows, competing = fresh(asked)
    out: dict[bytes, _Entry] = {}
    for (i, js), item_rows, item_competing in zip(todo, rows, competing, strict=True):
        w = winner(item_competing)
        for n, j in enumerate(js):
            c = item_competing[n]
            out[keys[i][j]] = (item_rows[n], c, c is None or n == w)
    return out
