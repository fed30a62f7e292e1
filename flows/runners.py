"""Which Prefect task runner executes the shards: one place for the choice.

- `thread` (default): a thread pool of `pipeline.shard_concurrency` workers — best on a
  small machine (docs/stack.md: process pools cost ~150 ms per task on 2 cores); the OpenAI
  judge runs its HTTP calls concurrently inside each shard anyway.
- `dask`: prefect-dask's DaskTaskRunner, on an existing cluster (`--dask-address
  tcp://host:8786`) or a temporary local one. It pays off on real multi-node clusters
  with coarse shards (hundreds of answers): each worker runs its own Prefect client.

On an existing cluster every worker must share the client's state (`check_workers`, run by
`ragspan evaluate` before the flow starts): the state dir — the corpus index the client
builds there, the judge cache each worker opens under its own RAGSPAN_HOME — and the
directory Prefect persists step results to. A worker that cannot see them stops the run
with an error naming the worker and the path, before any shard is submitted.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
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


# ----- what every worker of an existing cluster must see -----------------------------------

PROBE = ".ragspan-worker-probe"


def worker_view(probes: dict[str, list[str]]) -> dict[str, str]:
    """Runs on each Dask worker: {what: problem} for every probe {what: [dir, token]} the
    worker cannot read back, plus its own state dir when it is not the client's."""
    from ragspan.tasks.config import state_dir

    problems = {}
    for what, (where, token) in probes.items():
        path = Path(where) / PROBE
        try:
            seen = path.read_text(encoding="utf-8")
        except OSError as exc:
            problems[what] = f"cannot read {path} ({exc.__class__.__name__})"
            continue
        if seen != token:
            problems[what] = f"{where} is not the client's (another probe is there)"
    mine = state_dir()
    if "state dir" in probes and mine != Path(probes["state dir"][0]):
        problems["RAGSPAN_HOME"] = f"its state dir is {mine}, not {probes['state dir'][0]}"
    return problems


def check_workers(address: str, state: Path, results: Path, timeout: float = 30.0) -> int:
    """Ask every worker of the cluster at `address` whether it sees `state` (the state dir:
    corpus index, judge cache) and `results` (Prefect's step results) as the client does.
    Returns the number of workers; raises ConfigError naming each worker that does not."""
    from distributed import Client
    from ragspan.tasks.errors import ConfigError

    probes = {}
    for what, where in (("state dir", state), ("step results", results)):
        where.mkdir(parents=True, exist_ok=True)
        token = uuid.uuid4().hex
        (where / PROBE).write_text(token, encoding="utf-8")
        probes[what] = [str(where), token]
    try:
        with Client(address, timeout=timeout) as client:
            seen = client.run(worker_view, probes)
    except OSError as exc:
        raise ConfigError(f"--dask-address {address}: cannot reach the scheduler ({exc})") from None
    finally:
        for where, _ in probes.values():
            Path(where, PROBE).unlink(missing_ok=True)
    if not seen:
        raise ConfigError(f"--dask-address {address}: no worker is connected to the scheduler")
    bad = {w: p for w, p in seen.items() if p}
    if bad:
        lines = [f"  {w}: " + "; ".join(f"{what}: {why}" for what, why in sorted(p.items())) for w, p in sorted(bad.items())]
        raise ConfigError(
            f"{len(bad)} of {len(seen)} Dask workers cannot see this run's state:\n" + "\n".join(lines)
            + f"\nStart every worker with RAGSPAN_HOME={state} on storage all machines mount at that path "
            "(docs/operations.md, \"A Dask cluster\").")
    return len(seen)


def results_dir() -> Path:
    """Where this process's Prefect persists step results."""
    from prefect.settings import PREFECT_RESULTS_LOCAL_STORAGE_PATH

    return Path(os.path.expanduser(str(PREFECT_RESULTS_LOCAL_STORAGE_PATH.value()))).resolve()
