"""Shards in a bounded window: submitted as workers free up, spilled to disk as they end.

Submitting every shard at once made the flow hold every shard's passages (in its
parameters) and every shard's result (in its future) until the last one finished: memory
grew with the number of answers. Here at most `in_flight` shards are submitted and not
yet collected; the oldest is collected first (shards are about the same size), its
result spilled (tasks/reuse/shard_spill.py) and its future dropped, then the next shard is
made (tasks/core/shards.iter_shards makes them one at a time) and submitted.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ragspan.tasks.core.shards import Shard
from ragspan.tasks.reuse.shard_spill import SpilledShard, spill


def spilled_results(submit: Callable[[Shard], Any], shards: Iterable[Shard], in_flight: int,
                    directory: Path) -> list[SpilledShard]:
    """Every shard run through `submit` (a Prefect future's `.result()` is its
    ShardResult), at most `in_flight` at a time; their results on disk, in shard order."""
    pending: deque[tuple[int, Any]] = deque()
    done: list[SpilledShard] = []
    for shard in shards:
        pending.append((shard.index, submit(shard)))
        if len(pending) >= in_flight:
            index, future = pending.popleft()
            done.append(spill(future.result(), directory, index))
    while pending:
        index, future = pending.popleft()
        done.append(spill(future.result(), directory, index))
    return done
