"""Which Prefect task runner executes the shards: one place for the choice.

- `thread` (default): a thread pool of `pipeline.shard_concurrency` workers — best on a
  small machine (docs/stack.md: process pools cost ~150 ms per task on 2 cores); the OpenAI
  judge runs its HTTP calls concurrently inside each shard anyway.
- `dask`: prefect-dask's DaskTaskRunner, on an existing cluster (`--dask-address
  tcp://host:8786`) or a temporary local one. It pays off on real multi-node clusters
  with coarse shards (hundreds of answers): each worker runs its own Prefect client.
  Workers must see the same ragspan state dir (RAGSPAN_HOME on shared storage) so the
  search index and cached results are found.
"""

from __future__ import annotations

from typing import Any, Literal

RunnerKind = Literal["thread", "dask"]


def task_runner(kind: RunnerKind, shard_concurrency: int, dask_address: str | None = None) -> Any:
    if kind == "thread":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=shard_concurrency)
    if kind == "dask":
        from prefect_dask import DaskTaskRunner

        if dask_address:
            return DaskTaskRunner(address=dask_address)
        # A temporary local cluster: processes, one thread each (the local judge is
        # pure Python, so threads within a worker would share one GIL).
        return DaskTaskRunner(cluster_kwargs={"n_workers": shard_concurrency, "threads_per_worker": 1,
                                              "processes": True, "dashboard_address": None})
    raise ValueError(f"unknown task runner {kind!r}")
