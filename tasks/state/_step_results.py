"""Step results (Prefect's persisted step cache) carry a checksum: a result whose bytes
changed on disk is never unpickled into a different table. Prefect treats a record it
cannot read as a cache miss — the step runs again and rewrites it — so a damaged result
costs only that step's time. Two checks make that visible, with one warning line: the
serializer (a payload that no longer matches its checksum), and `sweep` at the start of
each run (every record written since the last sweep: Prefect writes records in place,
so a killed run can leave one half-written). Prefect writes the records; the store layer
(tasks/state/_store.py, the `step_results` store) lists, heals and prunes them."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from . import _heal as heal
from ._dirs import damaged_dir
from ._store import REGISTRY, dir_store

STORE = REGISTRY["step_results"].entry_title
# The serializer type a sealed record names (tasks/steps/cache_policy.py's CheckedPickle,
# the Prefect side of the seal): its payload is checked here without unpickling.
SEALED_PICKLE = "ragspan-checked-pickle"


def unsealed_result(blob: bytes) -> bytes:
    """A step result's payload, checked against its seal; a mismatch warns once and raises
    ValueError (Prefect then treats the record as a miss: the step runs again)."""
    try:
        return heal.unsealed(blob)
    except ValueError as exc:
        from ._stores import step_results_dir

        heal.warn(STORE, step_results_dir(), f"a stored result {exc}",
                  "that step runs again and its result is written anew")
        raise


SWEPT = ".swept"  # marker: records older than its mtime were found readable


def check_record(path: Path) -> str | None:
    """None when `path` is a result record Prefect can parse whose payload matches its
    checksum (nothing is unpickled); else what is wrong."""
    try:
        record = json.loads(path.read_bytes())
        result = record["result"]
        if record["metadata"]["serializer"]["type"] == SEALED_PICKLE:
            heal.unsealed(result.encode())
    except FileNotFoundError:
        return None  # pruned meanwhile
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:100] if str(exc) else ''}".rstrip(": ")
    return None


def sweep(root: Path) -> int:
    """Check every record written (or changed) since the last sweep — what a killed run
    half-wrote, what another tool touched — and move the unreadable ones aside, with one
    warning line: the steps they held run again. Returns how many were moved."""
    if not root.is_dir():
        return 0
    marker = root / SWEPT
    since = marker.stat().st_mtime - 5 if marker.exists() else 0.0  # 5 s: coarse clocks
    started = time.time()
    bad: list[tuple[Path, str]] = []
    for p in dir_store("step_results", root).names():
        try:
            if p.is_file() and p.stat().st_mtime >= since:
                problem = check_record(p)
                if problem is not None:
                    bad.append((p, problem))
        except FileNotFoundError:
            continue
    for p, _ in bad:
        heal.move_aside(p, STORE)
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        heal.warn(STORE, bad[0][0], bad[0][1] + more, f"moved aside to {damaged_dir()}; "
                  "the steps they held run again and their results are written anew")
    try:
        marker.touch()
        os.utime(marker, (started, started))
    except OSError:
        pass
    return len(bad)
