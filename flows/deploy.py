"""The watch flow as a `prefect.yaml`, for `prefect deploy` to a work pool and `prefect
worker start` (docs/operations.md): the same deployment `ragspan serve` serves — its
schedule, its index-rebuilt trigger, its parameters and its queue come from
`flows.serve.build_deployment`, here only written out as YAML.

The flow's code is the installed `ragspan` package (entrypoint `ragspan.flows.watch.watch`),
so the worker needs ragspan in its Python environment; the workspace is the flow run's
working directory (`workspace: "."`), set by the pull step. `pull` is left empty: `prefect
deploy`, run in the workspace, then makes the working directory that workspace — right for
a `process` pool on the same machine; a Docker or Kubernetes pool replaces it (see the docs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PREFECT_YAML = "prefect.yaml"
WORK_POOL = "ragspan"
# Written when params.yaml sets no schedule.cron: inactive until the user turns it on.
DEFAULT_CRON = "0 6 * * *"

_HEADER = """\
# The ragspan watch flow as a Prefect deployment (written by `ragspan init`; docs/operations.md).
# Deploy it from this directory to a process work pool and run it with a worker:
#   prefect work-pool create {pool} --type process
#   prefect deploy --all
#   prefect worker start --pool {pool}
# then `ragspan notify index-rebuilt --index NAME [--run FILE]` (or the cron schedule) starts a run.
# It is the deployment `ragspan serve` serves (same trigger, schedule, parameters, queue of one).
# `pull` is empty: `prefect deploy` sets the run's working directory to this workspace. For a
# Docker or Kubernetes work pool, change work_pool and pull as docs/operations.md shows.
"""


def deployment_spec(params_path: str = "params.yaml", cron: str = "", timezone: str = "UTC",
                    schedule_index: str = "demo", index: str | None = None,
                    pool: str = WORK_POOL) -> dict[str, Any]:
    """The prefect.yaml content (a dict) for the watch deployment."""
    import prefect
    from ragspan.flows.serve import build_deployment
    from ragspan.flows.watch import EVENT

    dep = build_deployment(Path("."), params_path, cron or DEFAULT_CRON, timezone, index,
                           schedule_index=schedule_index)
    (schedule,) = dep.schedules
    (trigger,) = dep.triggers
    return {
        "name": "ragspan-workspace",
        "prefect-version": prefect.__version__,
        "build": None,
        "push": None,
        "pull": None,
        "deployments": [{
            "name": dep.name,
            "entrypoint": dep.entrypoint,
            "description": f"ragspan watch flow for this workspace: evaluate after {EVENT} events and on "
                           "its schedule",
            "tags": list(dep.tags),
            "parameters": dict(dep.parameters),
            "enforce_parameter_schema": dep.enforce_parameter_schema,
            "concurrency_limit": {"limit": dep.concurrency_limit,
                                  "collision_strategy": dep.concurrency_options.collision_strategy.value},
            "schedules": [{"cron": schedule.schedule.cron, "timezone": schedule.schedule.timezone,
                           "active": bool(cron), "parameters": dict(schedule.parameters)}],
            "triggers": [{"type": "event", "name": trigger.name, "enabled": True,
                          "match": trigger.match.model_dump(), "expect": sorted(trigger.expect),
                          "parameters": dict(trigger.parameters or {})}],
            "work_pool": {"name": pool, "work_queue_name": None, "job_variables": {}},
        }],
    }


def prefect_yaml(**kwargs: Any) -> str:
    """`deployment_spec` as the text of a prefect.yaml, with a header saying how to use it."""
    import yaml

    spec = deployment_spec(**kwargs)
    pool = spec["deployments"][0]["work_pool"]["name"]
    return _HEADER.format(pool=pool) + yaml.safe_dump(spec, sort_keys=False, width=100)
