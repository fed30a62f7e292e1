"""The state dir's stores, their sizes, and pruning (`ragspan cache stats|clear|prune`).

Every store is registered once, in tasks/state/_store.py `REGISTRY`, and built on its store
layer; this module goes by that registry. Ten stores are caches — deleting any entry
costs only time (or, for an LLM judge, the calls again) on the next run:

| store | where | an entry | "last used" |
|---|---|---|---|
| judge_cache | `judge-cache.sqlite` | one judge call (a row) | when it was made |
| verdict_cache | `verdict-cache.sqlite` | the local judge's verdicts last used on one day (UTC) | that day |
| answer_store | `answers/<context>/` | one context | touched on every reuse |
| inputs | `inputs/*.pickle` | one validated input | touched on every reuse |
| step_results | Prefect's result storage (`prefect/results/`) | one persisted step result | written |
| indexes | `index/<hash>/` | one corpus index | touched by every run that uses it |
| reports | `reports/<key>/` | the kept pieces of one unchanged run's results | touched on every reuse |
| digests | `digests.json` | the remembered md5s of input files (one file) | written |
| spill | `spill/<pid>-<ns>/` | one run's shard results on disk | written; only once its process is gone |

Two more are listed by `stats` but never pruned or cleared: the demo RAG's indexes
(`demo-index/`, the watchdog's current index, not a cache) and the Prefect database of
runs without a server (`prefect/*.db`: run history and artifacts).

Pruning removes the least recently used entries first, across all the caches, until
every limit holds. After each evaluate run the `state:` limits of params.yaml apply,
sparing entries used in the last hour (a concurrent run may be using them).
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from ._store import REGISTRY, DirStore, Entry, SqliteStore, registered

CACHES = tuple(k for k, r in REGISTRY.items() if r.pruned)
KEPT = tuple(k for k, r in REGISTRY.items() if not r.pruned)
SQLITE = tuple(k for k, r in REGISTRY.items() if r.kind == "sqlite")  # one file, entries inside it
TITLES = {k: r.title for k, r in REGISTRY.items()}
JUDGE_FILE = REGISTRY["judge_cache"].where
RECENT_S = 3600.0  # what the pruning after a run spares: entries used this recently
__all__ = ["CACHES", "KEPT", "SQLITE", "TITLES", "Entry", "clear", "entries", "prune", "stats", "store_paths"]
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
    """Where Prefect persists step results: its active setting (tasks/supervision/runtime.py points it
    under the state dir unless the user set it)."""
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH

    return Path(PREFECT_RESULTS_LOCAL_STORAGE_PATH.value()).expanduser()


def store_paths(root: Path | None = None) -> dict[str, Path]:
    """Where each registered store is: under the state dir, but the step results where
    Prefect keeps them."""
    paths = {k: r.location(root) for k, r in REGISTRY.items()}
    paths["step_results"] = step_results_dir()
    return paths


def _store(key: str, paths: dict[str, Path]) -> DirStore | SqliteStore:
    return registered(key, paths[key])


def entries(store: str, paths: dict[str, Path] | None = None) -> list[Entry]:
    """The entries pruning may remove (every entry of a store that is kept, not pruned)."""
    paths = paths or store_paths()
    found = _store(store, paths)
    return found.prunable(store) if REGISTRY[store].pruned else found.entries(store)


def stats(paths: dict[str, Path] | None = None) -> dict[str, dict]:
    """{store: {path, title, kind, entries, bytes, oldest, newest, pruned}} for every store."""
    paths = paths or store_paths()
    out = {}
    for key, r in REGISTRY.items():
        found = _store(key, paths)
        es = found.entries(key)
        out[key] = {"path": str(paths[key]), "title": r.title, "kind": r.kind,
                    "entries": found.count() if isinstance(found, SqliteStore) else len(es),
                    "bytes": found.bytes() if r.kind == "sqlite" else sum(e.bytes for e in es),
                    "oldest": min((e.used for e in es), default=None),
                    "newest": max((e.used for e in es), default=None), "pruned": r.pruned}
    return out


def total_bytes(paths: dict[str, Path] | None = None) -> int:
    """The caches' size on disk, without listing rows."""
    paths = paths or store_paths()
    return sum(_store(s, paths).bytes() for s in CACHES)


def _remove(chosen: list[Entry], paths: dict[str, Path] | None) -> None:
    from ._store import discard

    paths = paths or store_paths()
    for key in SQLITE:
        rows = [e.key for e in chosen if e.store == key]
        if rows:
            store = _store(key, paths)
            assert isinstance(store, SqliteStore)
            store.delete(rows)
    for e in chosen:
        if e.store not in SQLITE:
            discard(e.path)  # a directory out of sight first: a run beside this one never sees half of it


def prune(max_bytes: int = 0, max_age_s: float | None = None, spare_recent_s: float = 0, dry_run: bool = False,
          paths: dict[str, Path] | None = None, now: float | None = None) -> dict[str, dict]:
    """Remove cache entries unused for `max_age_s` (None: no age limit), then the least
    recently used until the caches total at most `max_bytes` (0: no size limit).
    Entries used in the last `spare_recent_s` stay whatever the limits, and so do those
    a store keeps whatever their age (a live run's spill). Returns
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
        _remove(chosen, paths)
    out: dict[str, dict] = {s: {"entries": 0, "bytes": 0} for s in CACHES}
    for e in chosen:
        out[e.store]["entries"] += 1
        out[e.store]["bytes"] += e.bytes
    return out


def clear(stores: tuple[str, ...] = CACHES, paths: dict[str, Path] | None = None) -> dict[str, dict]:
    """Empty whole stores (the caches only; of the spill, what no live run owns). Returns
    what each held."""
    paths = paths or store_paths()
    out = {}
    for store in stores:
        if store not in CACHES:
            raise ValueError(f"{store} is not a cache")
        found = _store(store, paths)
        size = found.bytes() if store in SQLITE else None
        gone = found.clear(store)
        out[store] = {"entries": len(gone), "bytes": size if size is not None else sum(e.bytes for e in gone)}
    return out


def mark_used(path: str | Path) -> None:
    """Record a use of a directory entry (a corpus index) for pruning by age."""
    from ._store import touch

    touch(Path(path))


def prune_after_run(max_size: str, max_age_days: float) -> dict[str, dict]:
    """params.yaml `state:` limits, sparing what was used in the last hour. A failure is a
    warning: the run's results are already written."""
    import logging

    try:
        return prune(parse_size(max_size), max_age_days * 86400 or None, spare_recent_s=RECENT_S)
    except Exception as exc:  # noqa: BLE001
        logging.getLogger("ragspan").warning("state dir not pruned: %s", exc)
        return {}
