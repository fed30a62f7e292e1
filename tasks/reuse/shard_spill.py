"""Shard results on disk: a finished shard's tables leave the flow's memory at once.

A run of N answers used to hold every shard's ShardResult (claims, evidence spans,
diagnoses, answer spans: ~7 KB per answer) in its futures until the last shard finished,
then a merged copy beside them. Now the flow hands each result here as it arrives
(flows/shard_window.py keeps a bounded number of shards in flight) and keeps only a
`SpilledShard` — where the tables are, plus the shard's judge stats, task states and
answers to retry (a few hundred bytes). The tables are read back one shard's table at a
time (answer_store.RunParts.chunks): the store segment and the results' table files are
written from them as Parquet row groups, so no table of every answer is assembled.

Files: `<state>/spill/<pid>-<ns>/shard-NNNNN/<table>.pickle` — pickle, because it gives back the
exact frames (dtypes, NA kinds): the outputs assembled from disk are byte-identical to
those assembled in memory. The store layer's `spill` store (tasks/state/_store.py): each run's
directory an entry, each shard's directory written aside and renamed (whole or absent; no
room is DiskFull), not sealed (read back once, by the process that wrote it). A run's
directory (with the results' table files staged in it, `tables/`) is removed once
the results are written; one a killed run left behind (its process gone) is
removed by the next run that spills, and by `ragspan cache prune|clear` — never one whose
process is alive.
"""

from __future__ import annotations

import os
import pickle
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from ragspan.tasks.core.judging import JudgeStats
from ragspan.tasks.core.shards import ShardResult
from ragspan.tasks.state import dir_store

TABLES = ("claims", "spans", "diagnoses", "answer_spans", "judged")  # judged: ShardResult.judged


@dataclass(frozen=True)
class SpilledShard:
    """A shard's result whose tables are on disk; everything else stays here."""

    path: str
    stats: JudgeStats
    states: dict[str, dict[str, int]]
    retry: frozenset[str] = field(default_factory=frozenset)
    searched: frozenset[str] = field(default_factory=frozenset)  # ShardResult.searched
    resumed: int = 0  # ShardResult.resumed

    def table(self, name: str) -> pd.DataFrame:
        """One of TABLES, read back (only that one: the others stay on disk)."""
        with open(Path(self.path) / f"{name}.pickle", "rb") as f:
            return pickle.load(f)


@contextmanager
def spilling(root: Path) -> Iterator[Path]:
    """A fresh directory for this run's shards, removed when the block ends (merged, or
    failed); directories a killed run left (its process gone) are removed first."""
    store = dir_store("spill", root)
    store.clear()  # only the directories whose process is gone (store.owner_gone)
    mine = root / f"{os.getpid()}-{time.time_ns()}"
    mine.mkdir(parents=True)
    try:
        yield mine
    finally:
        shutil.rmtree(mine, ignore_errors=True)


def spill(result: ShardResult, directory: Path, index: int) -> SpilledShard:
    """Write the shard's tables to `directory` (aside, then renamed) and return the handle."""
    tables = {"claims": result.claims, "spans": result.spans, "diagnoses": result.diagnoses,
              "answer_spans": result.answer_spans_table(),
              "judged": result.judged if result.judged is not None else pd.DataFrame({"claim_id": []})}


    def fill(tmp: Path) -> None:
        for name, table in tables.items():
            with open(tmp / f"{name}.pickle", "wb") as f:
                pickle.dump(table, f, protocol=pickle.HIGHEST_PROTOCOL)

    shards = dir_store("spill", directory.parent).within(directory.name)
    path = shards.write_dir(f"shard-{index:05d}", fill)
    return SpilledShard(str(path), result.stats, result.states, result.retry, result.searched, result.resumed)
