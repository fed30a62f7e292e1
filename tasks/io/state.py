"""The state dir's stores, their sizes, and pruning (`ragspan cache stats|clear|prune`).

Six stores are caches — deleting any entry costs only time (or, for an LLM judge, the
calls again) on the next run:

| store | where | an entry | "last used" |
|---|---|---|---|
| judge_cache | `judge-cache.sqlite` | one judge call (a row) | when it was made |
| verdict_cache | `verdict-cache.sqlite` | the local judge's verdicts last used on one day (UTC) | that day |
| answer_store | `answers/<context>/` | one context | touched on every reuse |
| inputs | `inputs/*.pickle` | one validated input | touched on every reuse |
| step_results | Prefect's result storage (`prefect/results/`) | one persisted step result | written |
| indexes | `index/<hash>/` | one corpus index | touched by every run that uses it |

Two more are listed by `stats` but never pruned or cleared: the demo RAG's indexes
(`demo-index/`, the watchdog's current index, not a cache) and the Prefect database of
runs without a server (`prefect/*.db`: run history and artifacts).

Pruning removes the least recently used entries first, across all six stores, until
every limit holds. After each evaluate run the `state:` limits of params.yaml apply,
sparing entries used in the last hour (a concurrent run may be using them).
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from ragspan.tasks.config import state_dir
from ragspan.tasks.judges import verdict_cache
from ragspan.tasks.judges.cache import CACHE_FILE, JudgeCache

CACHES = ("judge_cache", "verdict_cache", "answer_store", "inputs", "step_results", "indexes")
KEPT = ("demo_indexes", "prefect_db")
SQLITE = ("judge_cache", "verdict_cache")  # one file, entries inside it
JUDGE_FILE = CACHE_FILE  # the judge cache decides its own file name
RECENT_S = 3600.0  # what the pruning after a run spares: entries used this recently
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "t": 10**12, "tb": 10**12}


def parse_size(text: str | float) -> int:
    """'10GB', '500 MB', '1.5g', 2048 → bytes (powers of 10); '0' or '' = no limit (0)."""
    if isinstance(text, int | float):
        return int(text)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)?\s*([a-zA-Z]*)\s*", text or "0")
    if not m or m.group(2).lower() not in _UNITS or (m.group(1) is None and m.group(2)):
        raise ValueError(f"not a size: {text!r} (e.g. 10GB, 500MB)")
    return int(float(m.group(1) or 0) * _UNITS[m.group(2).lower()])


def human(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def step_results_dir() -> Path:
    """Where Prefect persists step results: its active setting (flows/runtime.py points it
    under the state dir unless the user set it)."""
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH

    return Path(PREFECT_RESULTS_LOCAL_STORAGE_PATH.value()).expanduser()


def store_paths(root: Path | None = None) -> dict[str, Path]:
    root = root or state_dir()
    results = step_results_dir()
    return {"judge_cache": root / JUDGE_FILE, "verdict_cache": root / verdict_cache.CACHE_FILE,
            "answer_store": root / "answers", "inputs": root / "inputs",
            "step_results": Path(results), "indexes": root / "index", "demo_indexes": root / "demo-index",
            "prefect_db": root / "prefect"}


@dataclass(frozen=True)
class Entry:
    store: str
    path: Path       # the file or directory; for a judge-cache row, the database
    key: str         # the row's key for the judge cache, the day for the verdict cache, else ""
    bytes: int
    used: float      # last use, seconds since the epoch


def _tree_bytes(p: Path) -> int:
    if p.is_file():
        return p.stat().st_size
    total = 0
    for dirpath, _, files in os.walk(p):
        for f in files:
            try:
                total += os.stat(os.path.join(dirpath, f), follow_symlinks=False).st_size
            except FileNotFoundError:  # removed meanwhile by a run's own pruning
                pass
    return total


def _children(d: Path, files_only: bool = False) -> list[Path]:
    if not d.is_dir():
        return []
    return [p for p in d.iterdir() if not p.name.startswith(".") and (p.is_file() or not files_only)]


def _judge_files(db: Path) -> list[Path]:
    return [p for p in db.parent.glob(db.name + "*") if p.is_file()] if db.parent.is_dir() else []


def _judge_entries(db: Path) -> list[Entry]:
    """One entry per row; the file's size shared out in proportion to each row's text."""
    if not db.is_file():
        return []
    JudgeCache(db).close()  # integrity_check (once per process); a damaged file is salvaged first
    try:
        with sqlite3.connect(db, timeout=60) as conn:
            rows = conn.execute("SELECT key, created_at, length(key) + length(parts) + length(value) + 64 "
                                "FROM judge_calls").fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    size = sum(p.stat().st_size for p in _judge_files(db))
    weight = sum(r[2] for r in rows) or 1
    return [Entry("judge_cache", db, k, int(size * w / weight), float(t)) for k, t, w in rows]


def _verdict_entries(db: Path) -> list[Entry]:
    """One entry per day of last use; the file's size shared out by rows."""
    days = verdict_cache.rows_per_day(db)
    size = sum(p.stat().st_size for p in _judge_files(db))
    rows = sum(days.values()) or 1
    return [Entry("verdict_cache", db, str(day), int(size * n / rows), (day + 1) * verdict_cache.DAY_S - 1)
            for day, n in days.items()]


def entries(store: str, paths: dict[str, Path] | None = None) -> list[Entry]:
    paths = paths or store_paths()
    where = paths[store]
    if store == "judge_cache":
        return _judge_entries(where)
    if store == "verdict_cache":
        return _verdict_entries(where)
    if store == "step_results":
        found = [Path(dp) / f for dp, _, fs in os.walk(where) for f in fs] if where.is_dir() else []
    elif store == "inputs":
        found = _children(where, files_only=True)
    elif store == "prefect_db":
        found = [p for p in _children(where, files_only=True) if ".db" in p.name]
    else:
        found = _children(where)
    out = []
    for p in found:
        try:
            out.append(Entry(store, p, "", _tree_bytes(p), p.stat().st_mtime))
        except FileNotFoundError:
            pass
    return out


def stats(paths: dict[str, Path] | None = None) -> dict[str, dict]:
    """{store: {path, entries, bytes, oldest, newest, pruned}} for every store."""
    paths = paths or store_paths()
    out = {}
    for store in CACHES + KEPT:
        es = entries(store, paths)
        size = sum(p.stat().st_size for p in _judge_files(paths[store])) if store in SQLITE \
            else sum(e.bytes for e in es)
        out[store] = {"path": str(paths[store]), "entries": len(es), "bytes": size,
                      "oldest": min((e.used for e in es), default=None),
                      "newest": max((e.used for e in es), default=None), "pruned": store in CACHES}
    return out


def _delete_rows(db: Path, keys: list[str] | None) -> None:
    """Delete judge-cache rows (`keys`, or every row for None) and give the space back."""
    with sqlite3.connect(db, timeout=60) as conn:
        if keys is None:
            conn.execute("DELETE FROM judge_calls")
        else:
            conn.executemany("DELETE FROM judge_calls WHERE key = ?", [(k,) for k in keys])
    conn.close()
    conn = sqlite3.connect(db, timeout=60, isolation_level=None)  # VACUUM runs outside a transaction
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
    finally:
        conn.close()


def total_bytes(paths: dict[str, Path] | None = None) -> int:
    """The caches' size on disk, without listing rows."""
    paths = paths or store_paths()
    files = sum(p.stat().st_size for s in SQLITE for p in _judge_files(paths[s]))
    return files + sum(_tree_bytes(paths[s]) for s in CACHES if s not in SQLITE and paths[s].exists())


def _remove(chosen: list[Entry]) -> None:
    rows = [e for e in chosen if e.store == "judge_cache"]
    if rows:
        _delete_rows(rows[0].path, [e.key for e in rows])
    days = [e for e in chosen if e.store == "verdict_cache"]
    if days:
        verdict_cache.delete_days(days[0].path, [int(e.key) for e in days])
    for e in chosen:
        if e.store in SQLITE:
            continue
        if e.path.is_dir():  # out of sight first: a run beside this one never sees half of it
            hidden = e.path.with_name(f".gone-{time.time_ns()}-{e.path.name}")
            try:
                os.replace(e.path, hidden)
            except OSError:
                hidden = e.path
            shutil.rmtree(hidden, ignore_errors=True)
        else:
            e.path.unlink(missing_ok=True)


def prune(max_bytes: int = 0, max_age_s: float | None = None, spare_recent_s: float = 0, dry_run: bool = False,
          paths: dict[str, Path] | None = None, now: float | None = None) -> dict[str, dict]:
    """Remove cache entries unused for `max_age_s` (None: no age limit), then the least
    recently used until the five caches total at most `max_bytes` (0: no size limit).
    Entries used in the last `spare_recent_s` stay whatever the limits. Returns
    {store: {"entries": removed, "bytes": freed}}."""
    now = time.time() if now is None else now
    if max_age_s is None and (max_bytes <= 0 or total_bytes(paths) <= max_bytes):
        return {s: {"entries": 0, "bytes": 0} for s in CACHES}  # within the limits: no entry listing
    every = sorted((e for s in CACHES for e in entries(s, paths)), key=lambda e: e.used)
    chosen: list[Entry] = []
    if max_age_s is not None:
        chosen = [e for e in every if now - e.used >= max_age_s]
    total = sum(e.bytes for e in every) - sum(e.bytes for e in chosen)
    if max_bytes > 0 and total > max_bytes:
        taken = {id(e) for e in chosen}
        for e in every:
            if total <= max_bytes:
                break
            if id(e) not in taken:
                chosen.append(e)
                total -= e.bytes
    chosen = [e for e in chosen if now - e.used >= spare_recent_s]
    if not dry_run:
        _remove(chosen)
    out: dict[str, dict] = {s: {"entries": 0, "bytes": 0} for s in CACHES}
    for e in chosen:
        out[e.store]["entries"] += 1
        out[e.store]["bytes"] += e.bytes
    return out


def clear(stores: tuple[str, ...] = CACHES, paths: dict[str, Path] | None = None) -> dict[str, dict]:
    """Empty whole stores (the caches only). Returns what each held."""
    paths = paths or store_paths()
    held = stats(paths)
    for store in stores:
        if store not in CACHES:
            raise ValueError(f"{store} is not a cache")
        where = paths[store]
        if store == "judge_cache":
            if held[store]["entries"]:
                _delete_rows(where, None)
        elif store == "verdict_cache":
            for p in _judge_files(where):
                p.unlink(missing_ok=True)
        else:
            shutil.rmtree(where, ignore_errors=True)
    return {s: {"entries": held[s]["entries"], "bytes": held[s]["bytes"]} for s in stores}


def mark_used(path: str | Path) -> None:
    """Record a use of a directory entry (a corpus index) for pruning by age."""
    try:
        os.utime(path)
    except FileNotFoundError:
        pass


def prune_after_run(max_size: str, max_age_days: float) -> dict[str, dict]:
    """params.yaml `state:` limits, sparing what was used in the last hour. A failure is a
    warning: the run's results are already written."""
    import logging

    try:
        return prune(parse_size(max_size), max_age_days * 86400 or None, spare_recent_s=RECENT_S)
    except Exception as exc:  # noqa: BLE001
        logging.getLogger("ragspan").warning("state dir not pruned: %s", exc)
        return {}
