"""Step results (Prefect's persisted step cache) carry a checksum: a result whose bytes
changed on disk is never unpickled into a different table. Prefect treats a record it
cannot read as a cache miss — the step runs again and rewrites it — so a damaged result
costs only that step's time. Two checks make that visible, with one warning line: the
serializer (a payload that no longer matches its checksum), and `sweep` at the start of
each run (every record written since the last sweep: Prefect writes records in place,
so a killed run can leave one half-written). Prefect writes the records; the store layer
(tasks/state/_store.py, the `step_results` store) lists, heals and prunes them.

The register of runs (`.runs/`) spares the sweep what it need not read: each run that
writes records opens an entry when it starts and closes it when it ends cleanly, so a
record written inside a cleanly ended run's time — with no run that did not end cleanly
started before it — was written whole, and is not read again. A run killed, failed or
still going leaves its entry open: every record from its start on is checked, as before.
Times are the files' own modification times (the file system's clock, as the records')."""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from . import _heal as heal
from ._dirs import damaged_dir
from ._store import REGISTRY, dir_store
from ._workers import pid_alive

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
RUNS = ".runs"  # the register: `<pid>-<id>.open` / `.failed` (its start), `.clean` (start, end)
_STALE_OPEN_S = 86400.0  # an open entry this old is a run that will not end: dropped after a sweep


@contextmanager
def recording_run(root: Path) -> Iterator[None]:
    """Register the records written inside the block as one run's: its entry is closed
    clean only when the block ends without an exception (a failed run's threads may still
    be writing: its entry says `failed`, which the sweep treats as open; a killed run never
    gets here and leaves it open)."""
    entry = _open_entry(root)
    try:
        yield
    except BaseException:
        if entry is not None:
            with contextlib.suppress(OSError):
                entry.rename(entry.with_suffix(".failed"))
        raise
    if entry is not None:
        _close_entry(entry)


def _open_entry(root: Path) -> Path | None:
    runs = root / RUNS
    entry = runs / f"{os.getpid()}-{uuid.uuid4().hex[:8]}.open"
    try:
        runs.mkdir(parents=True, exist_ok=True)
        entry.touch()
        entry.write_text(str(entry.stat().st_mtime_ns))  # the start, on the records' clock
    except OSError:
        return None  # no register: the next sweep reads every record, as without one
    return entry


def _close_entry(entry: Path) -> None:
    try:
        start = int(entry.read_text())
        closed = entry.with_suffix(".clean")
        closed.touch()
        closed.write_text(f"{start} {closed.stat().st_mtime_ns}")  # written after the run's last record
        entry.unlink()
    except (OSError, ValueError):
        pass  # the entry stays open: its records are read by the next sweep


class _Register:
    """The register as the sweep reads it: which record times it may leave unread."""

    def __init__(self, root: Path) -> None:
        self.clean: list[tuple[int, int]] = []
        self.first_open: int | None = None  # the earliest start of a run that did not end cleanly
        self.files: list[tuple[Path, int]] = []  # (entry, its end or, when open, its start)
        for p in sorted((root / RUNS).glob("*")) if (root / RUNS).is_dir() else []:
            try:
                times = [int(t) for t in p.read_text().split()]
            except (OSError, ValueError):
                continue
            if p.suffix == ".clean" and len(times) == 2:
                self.clean.append((times[0], times[1]))
                self.files.append((p, times[1]))
            elif p.suffix in (".open", ".failed") and len(times) == 1:
                self.first_open = times[0] if self.first_open is None else min(self.first_open, times[0])
                self.files.append((p, times[0]))

    def vouches(self, mtime_ns: int) -> bool:
        if self.first_open is not None and mtime_ns >= self.first_open:
            return False
        return any(start <= mtime_ns <= end for start, end in self.clean)

    def forget_swept(self, swept_ns: int) -> None:
        """After a sweep: the entries it covered are dropped — closed and failed ones, and
        open ones whose process is gone (their records were read by it)."""
        for p, t in self.files:
            gone = p.suffix != ".open" or not pid_alive(int(p.name.split("-")[0])) \
                or t < swept_ns - _STALE_OPEN_S * 1e9
            if t <= swept_ns and gone:
                p.unlink(missing_ok=True)


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
    warning line: the steps they held run again. A record a cleanly ended run wrote is not
    read (the register above). Returns how many were moved."""
    if not root.is_dir():
        return 0
    marker = root / SWEPT
    since = marker.stat().st_mtime - 5 if marker.exists() else 0.0  # 5 s: coarse clocks
    started = time.time()
    register = _Register(root)
    bad: list[tuple[Path, str]] = []
    for p in dir_store("step_results", root).names():
        try:
            st = p.stat()
            if st.st_mtime >= since and p.is_file() and not register.vouches(st.st_mtime_ns):
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
    register.forget_swept(int((started - 5) * 1e9))  # the marker's 5 s: what the next sweep may read again
    return len(bad)
