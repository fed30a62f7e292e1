"""The validated-inputs cache's entries: reading one back, keeping one, and values that
follow from one entry's inputs alone (`kept_with_inputs`).

The entries themselves — the validated workspace and its base, keyed by the input files'
md5s, the run, the loader's arguments and code — are made by the loader
(tasks/inputs/load/workspace.py). Kept apart from it so that a step computing a value from
the inputs (the corpus index's name, tasks/steps/corpus_search.py) keeps it here without
importing the loader: the steps' code identity (tasks/config.EVALUATION_ROOTS) stays that
of the steps. Standard library only: the store layer (tasks/state/_store.py), `inputs`.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ragspan.tasks.state import dir_store, store_path

T = TypeVar("T")
INPUT_CACHE_KEEP = 3  # the most recent entries kept of each level (`ws-`, `base-`, `index-`, ...)


def inputs_root() -> Path:
    return store_path("inputs")


def cached_entry(path: Path) -> Any:
    """The value kept at `path`, or None: missing (in silence), or unreadable — a
    checksum mismatch, a truncated file, a pickle of another pandas — which is moved
    aside with one warning line, and the inputs are read from their files again. A read
    marks the entry used: kept by the pruning in keep_entry."""
    return dir_store("inputs", path.parent).read_file(path.name, pickle.loads,
                                                      "reading and validating the input files again")


def keep_entry(path: Path, value: Any) -> None:
    """Written aside, then renamed: an entry appears whole or not at all. A failure (a
    read-only state dir, a full disk: DiskFull, the store as it was) only costs the next
    load a full read."""
    store = dir_store("inputs", path.parent)
    try:
        store.write_file(path.name, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        store.keep_newest(INPUT_CACHE_KEEP, f"{path.name.split('-', 1)[0]}-*.pickle")  # per level
    except OSError:  # DiskFull included
        return


def kept_with_inputs(inputs_key: str, kind: str, version: str, compute: Callable[[], T]) -> T:
    """`compute()`: a value that follows from the validated inputs `inputs_key` names
    (Workspace.inputs_key) and `version` (the format or code computing it) alone, kept
    beside them as `<kind>-<hash>.pickle` — computed once per inputs entry, not on every
    run. No key (""): computed now. `kind`: a name without "-" (its pruning level)."""
    if not inputs_key:
        return compute()
    digest = hashlib.sha256(repr((inputs_key, kind, version)).encode()).hexdigest()[:32]
    path = inputs_root() / f"{kind}-{digest}.pickle"
    value = cached_entry(path)
    if value is None:
        value = compute()
        keep_entry(path, value)
    return value
