"""Unchanged re-runs: the results of a run whose every input is as before, taken whole.

A re-run on unchanged inputs used to hash every answer, read every stored answer back,
merge the tables and compute the report again (~12 s at 100k chunks × 10k answers) to
write the same files. What a run's results are follows from: the input files (their
md5s: `Workspace.input_files`), the run name, the settings, the answer-store context
(judge, code, thresholds, search depth: `answer_store.context_key`; the corpus is in the
input files), the answer store's
segments, the `--compare-to` file and the code of the evaluate flow with everything it
imports (tasks/config.RESULTS_ROOTS: the steps, the reporting, the flow's own wiring). A run that leaves nothing to
retry keeps its results' pieces under a key of all of these (its store segments as they
are *after* it stored its answers): the table files and chart images as written, the
results view and the page's middle (html.report_middle). A later run with the same key
has every answer in the store, so it would assemble exactly those tables; it writes the
kept pieces instead, with its own facts — judge statistics (no call: every answer
reused), the manifest — put in the results view, the headline and the manifest section.

Kept under `<state>/reports/<key>/` — the store layer's directory store `reports`
(tasks/state/_store.py): written aside, sealed, renamed; the SNAPSHOTS_KEEP most recently used.
A snapshot that cannot be read is a miss (moved aside, one warning line): the run computes
its report as before; one that cannot be written (no room: DiskFull, a read-only state dir)
is only a miss for the next run. `pipeline.reuse_answers: false` turns this off with the
answer store.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ragspan.tasks.config import RESULTS_ROOTS, Settings, source_hash
from ragspan.tasks.state import REGISTRY, DirStore, dir_store

if TYPE_CHECKING:
    from ragspan.tasks.inputs.load import Workspace

SNAPSHOT_FORMAT = "snapshot-1"
SNAPSHOTS_KEEP = REGISTRY["reports"].keep
PIECES = "pieces.pickle"  # the results view and the page's middle


@dataclass(frozen=True)
class Snapshot:
    """The kept pieces of an unchanged run's results."""

    directory: Path
    metrics: dict  # the results view as written (its judge and manifest are replaced)
    middle: str  # html.report_middle


def snapshot_key(input_files: dict[str, str], run: str | None, settings: Settings, context: str,
                 store: Path, comparison: str | None) -> str:
    """Everything a run's results follow from (see the module docstring). `store`: the
    answer store's directory for `context`, whose segment names are read now."""
    segments = [_stamped(seg) for seg in sorted(store.glob("seg-*"))] if store.is_dir() else []
    blob = json.dumps([SNAPSHOT_FORMAT, source_hash(RESULTS_ROOTS),
                       sorted(input_files.items()), run, settings.model_dump(mode="json"), context, segments,
                       comparison], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _stamped(segment: Path) -> list:
    """A segment as the key sees it: its name, and each file's name, size and mtime — a
    segment written over in place is a new key, so the run reads (and checks) the store."""
    files = sorted(f for f in segment.iterdir() if f.is_file())
    return [segment.name, [[f.name, (st := f.stat()).st_size, st.st_mtime_ns] for f in files]]


def _store() -> DirStore:
    return dir_store("reports")


_HEALED = "the report is computed again"


def find_snapshot(key: str) -> Snapshot | None:
    """The snapshot kept under `key`, or None (none, or unreadable: moved aside). A hit
    marks it used: kept by the pruning in keep_snapshot."""
    store = _store()
    directory = store.checked_dir(key, _HEALED)
    if directory is None:
        return None
    try:
        with open(directory / PIECES, "rb") as f:
            metrics, middle = pickle.load(f)
        return Snapshot(directory, metrics, middle)
    except (OSError, ValueError, pickle.UnpicklingError, EOFError) as exc:
        store.heal(directory, f"{type(exc).__name__}: {str(exc)[:120]}", _HEALED)
    return None


def keep_snapshot(key: str, out_dir: Path, files: tuple[str, ...], metrics: dict, middle: str) -> None:
    """Keep `files` of the results just written to `out_dir`, the results view and the
    page's middle under `key`. A failure (no room, read-only state) costs only a miss."""

    def fill(tmp: Path) -> None:
        for name in files:
            shutil.copyfile(out_dir / name, tmp / name)
        with open(tmp / PIECES, "wb") as f:
            pickle.dump((metrics, middle), f, protocol=pickle.HIGHEST_PROTOCOL)

    try:
        _store().write_dir(key, fill)  # keeps the SNAPSHOTS_KEEP most recently used
    except OSError:  # DiskFull included: the store as it was
        return


def unchanged_key(ws: Workspace, settings: Settings, context: str, answers_root: Path,
                  compare_to: str | None) -> Callable[[], str] | None:
    """The snapshot key of this run, computed when called (the store's segments as they
    are then); None when the answer store is off (nothing says every answer is known)."""
    if not settings.pipeline.reuse_answers:
        return None
    comparison = Path(compare_to).read_text(encoding="utf-8") if compare_to else None
    return lambda: snapshot_key(ws.input_files, ws.run, settings, context, answers_root / context, comparison)


def find_unchanged(ws: Workspace, settings: Settings, context: str, answers_root: Path,
                   compare_to: str | None) -> Snapshot | None:
    """The results an earlier run kept for exactly these inputs, settings and stored
    answers, or None."""
    key = unchanged_key(ws, settings, context, answers_root, compare_to)
    return None if key is None else find_snapshot(key())
