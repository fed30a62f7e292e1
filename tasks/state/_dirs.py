"""Where ragspan keeps its state: standard library only, so the command line can find it
before anything heavy is imported (tasks/config.py re-exports it)."""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """Where ragspan keeps state that must survive `dvc repro` (never a DVC out):
    Prefect home and results, the judge cache, corpus indexes. `RAGSPAN_HOME` overrides."""
    return Path(os.environ.get("RAGSPAN_HOME", ".ragspan")).resolve()


def damaged_dir() -> Path:
    """Where an unreadable store of the state dir is moved aside before it is rebuilt
    (tasks/state/_heal.py): kept for a post-mortem, the few most recent only."""
    return state_dir() / "damaged"


def state_path(*names: str) -> Path:
    """A place under the state dir that is not a store (the local server's record, the watch
    flow's queues, locks): named here so no other room builds state-dir paths."""
    return state_dir().joinpath(*names)
