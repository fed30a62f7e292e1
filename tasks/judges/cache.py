"""The judge cache: one SQLite file of finished model calls, so a changed re-run pays
only for what changed and a crashed run resumes without repeating a finished call.

- Where: the registry's `judge_cache` store, `<state dir>/judge-cache.sqlite` (RAGSPAN_HOME or ./.ragspan) — never a
  DVC out, which DVC deletes before a stage runs.
- Key: sha256 of a canonical JSON of the parts that change an answer — judge kind,
  model, endpoint (without credentials or query), prompt id + version, schema version,
  answer-changing options (temperature, seed, max completion tokens) and the exact
  messages sent. Transport knobs (timeouts, retries, concurrency) are not in it. The
  parts minus the messages are stored beside the value, so a miss can be explained.
- Value: the parsed, schema-valid model output (JSON) plus its token usage. Only
  successful calls are stored: refusals, truncations, unparseable output and HTTP
  failures never are (a re-run tries them again).
- Durability: WAL journal, one short transaction per call. A committed call survives a
  SIGKILL of the process (it is in the WAL, which SQLite replays on the next open);
  `synchronous=NORMAL` trades only power-loss durability for speed.
- Concurrency: any number of threads (one connection per cache object, guarded by a
  lock) and processes (SQLite file locks, `busy_timeout`); `INSERT OR IGNORE` so two
  writers of the same key keep the first, identical answer.
- Secrets: the API key is never a key part or a value; `endpoint_label` strips
  user-info and query strings from URLs before they are hashed or stored.
- Store: a SQLite store of the store layer (tasks/state/_store.py `sqlite_store`): opened with
  WAL, a busy timeout and the init lock, checked once per process, a damaged file salvaged
  (every readable row kept), a full disk `DiskFull` with the file as it was. Pruned by
  row, oldest call first (`entries_sql`).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit, urlunsplit

from ragspan.tasks.state import REGISTRY, SqliteStore, register_sqlite, store_path

CACHE_FILE = REGISTRY["judge_cache"].where
_SCHEMA = """
CREATE TABLE IF NOT EXISTS judge_calls (
    key               TEXT PRIMARY KEY,
    kind              TEXT NOT NULL,
    model             TEXT NOT NULL,
    endpoint          TEXT NOT NULL,
    prompt_id         TEXT NOT NULL,
    prompt_version    TEXT NOT NULL,
    schema_version    TEXT NOT NULL,
    parts             TEXT NOT NULL,
    value             TEXT NOT NULL,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    created_at        REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS judge_calls_model ON judge_calls (model, prompt_id, prompt_version);
CREATE TABLE IF NOT EXISTS output_modes (
    endpoint   TEXT NOT NULL,
    model      TEXT NOT NULL,
    mode       TEXT NOT NULL,
    why        TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (endpoint, model)
);
"""


def default_cache_path() -> Path:
    return store_path("judge_cache")


def sqlite_store(path: Path) -> SqliteStore:
    """The judge cache at `path` as the store layer keeps it: salvaged when damaged (paid
    rows), one entry per call for pruning, weighed by its text."""
    return SqliteStore(
        path, "judge cache", _SCHEMA, ("judge_calls", "output_modes"), salvage=True,
        action="the unreadable calls will be asked again",
        entries_sql="SELECT key, created_at, length(key) + length(parts) + length(value) + 64 FROM judge_calls",
        delete_sql="DELETE FROM judge_calls WHERE key = ?", clear_sql="DELETE FROM judge_calls")


register_sqlite("judge_cache", sqlite_store)  # the state room opens this store by its key (cache stats, clear, prune)


def endpoint_label(base_url: str) -> str:
    """The endpoint as keyed and stored: scheme://host[:port]/path, no user-info, no
    query or fragment (some gateways put keys there), no trailing slash."""
    if not base_url:
        return ""
    parts = urlsplit(base_url.strip())
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme.lower(), netloc.lower(), parts.path.rstrip("/"), "", ""))


def cache_key(parts: dict[str, Any]) -> str:
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class JudgeCache:
    """A content-addressed store of finished judge calls (see the module docstring)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self.store = sqlite_store(self.path)
        self._lock = threading.Lock()
        # checked once per process (a damaged file keeps its readable rows); no room even
        # to open it: DiskFull naming the file
        self._conn = self.store.connect()

    # -- calls -------------------------------------------------------------------------------

    def get(self, key: str) -> tuple[Any, dict[str, int]] | None:
        """(value, usage) of a finished call, or None."""
        with self._lock, self.store.writing():
            row = self._conn.execute(
                "SELECT value, prompt_tokens, completion_tokens FROM judge_calls WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        return json.loads(row[0]), {"prompt_tokens": row[1], "completion_tokens": row[2]}

    def put(self, key: str, parts: dict[str, Any], value: Any, usage: dict[str, int] | None = None) -> None:
        """Store one finished call (committed before this returns)."""
        usage = usage or {}
        described = {k: v for k, v in parts.items() if k != "messages"}
        if "messages" in parts:
            described["messages_sha256"] = cache_key({"messages": parts["messages"]})
        row = (
            key, str(parts.get("kind", "")), str(parts.get("model", "")), str(parts.get("endpoint", "")),
            str(parts.get("prompt_id", "")), str(parts.get("prompt_version", "")),
            str(parts.get("schema_version", "")), json.dumps(described, sort_keys=True, ensure_ascii=False),
            json.dumps(value, sort_keys=True, ensure_ascii=False),
            int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0), time.time(),
        )
        with self._lock, self.store.writing():  # no room: DiskFull naming the file
            self._conn.execute("INSERT OR IGNORE INTO judge_calls VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", row)

    # -- structured-output modes (tasks/judges/output_modes.py) -------------------------------

    def output_mode(self, endpoint: str, model: str) -> tuple[str, str] | None:
        """(mode, why) negotiated earlier with this endpoint + model, or None."""
        with self._lock:
            row = self._conn.execute("SELECT mode, why, updated_at FROM output_modes WHERE endpoint = ? AND model = ?",
                                     (endpoint, model)).fetchone()
        if row is None:
            return None
        return row[0], f"{row[1]} (negotiated {time.strftime('%Y-%m-%d', time.gmtime(row[2]))})"

    def remember_output_mode(self, endpoint: str, model: str, mode: str, why: str) -> None:
        with self._lock, self.store.writing():
            self._conn.execute("INSERT OR REPLACE INTO output_modes VALUES (?,?,?,?,?)",
                               (endpoint, model, mode, why, time.time()))

    # -- maintenance (`ragspan cache stats|clear`) ------------------------------------------

    def stats(self) -> dict[str, Any]:
        with self._lock:
            total = self._conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(prompt_tokens),0), COALESCE(SUM(completion_tokens),0) FROM judge_calls"
            ).fetchone()
            groups = self._conn.execute(
                "SELECT kind, model, endpoint, prompt_id, prompt_version, COUNT(*), SUM(prompt_tokens),"
                " SUM(completion_tokens), MIN(created_at), MAX(created_at) FROM judge_calls"
                " GROUP BY kind, model, endpoint, prompt_id, prompt_version ORDER BY model, prompt_id, prompt_version"
            ).fetchall()
        size = self.store.bytes()
        return {
            "path": str(self.path), "bytes": size, "entries": total[0],
            "prompt_tokens": total[1], "completion_tokens": total[2],
            "groups": [
                {"kind": g[0], "model": g[1], "endpoint": g[2], "prompt": f"{g[3]}@{g[4]}", "entries": g[5],
                 "prompt_tokens": g[6], "completion_tokens": g[7], "first": g[8], "last": g[9]}
                for g in groups
            ],
        }

    def clear(self, model: str | None = None, prompt_version: str | None = None) -> int:
        """Delete entries (all, or those of a model and/or prompt version); returns how many.
        `prompt_version` is `ID@VERSION` (e.g. `extract@1`) or a bare version (any prompt)."""
        where, args = [], []
        if model is not None:
            where.append("model = ?")
            args.append(model)
        if prompt_version is not None:
            if "@" in prompt_version:
                pid, ver = prompt_version.split("@", 1)
                where.append("prompt_id = ? AND prompt_version = ?")
                args += [pid, ver]
            else:
                where.append("prompt_version = ?")
                args.append(prompt_version)
        sql = "DELETE FROM judge_calls" + (" WHERE " + " AND ".join(where) if where else "")
        # through the store layer: no room (a VACUUM needs a copy's worth) is DiskFull naming the file
        with self._lock, self.store.writing():
            n = self._conn.execute(sql, args).rowcount
            if model is not None or not where:  # what was learned of a server goes with its calls
                self._conn.execute("DELETE FROM output_modes" + (" WHERE model = ?" if model is not None else ""),
                                   (model,) if model is not None else ())
            if not where:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                self._conn.execute("VACUUM")
        return n

    def __len__(self) -> int:
        return self.store.count()  # the store layer's count: one entry per stored call

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
