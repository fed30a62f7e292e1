"""Operations commands: `ragspan serve`, `ragspan server start`, `ragspan notify
index-rebuilt`, `ragspan history` and `ragspan demo-rag`. See docs/operations.md.

Prefect is imported inside the handlers, after the API URL is settled: Prefect reads its
settings once, at import."""


from __future__ import annotations

import os
import urllib.request
from pathlib import Path

from ragspan.tasks.errors import NoServer

DEPLOYMENT = "ragspan-watch"


LOCAL_API = "http://127.0.0.1:{port}/api"


def _healthy(api_url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(api_url.rstrip("/") + "/health", timeout=timeout) as resp:
            return resp.status == 200
    except (OSError, ValueError):
        return False


def settle_api_url(given: str | None = None, port: int = 4200) -> str:
    """--api-url, else PREFECT_API_URL, else the recorded local server, else a local server
    on 127.0.0.1:PORT if it answers."""
    url = given or os.environ.get("PREFECT_API_URL")
    if not url:
        from ragspan.tasks.supervision.local_server import read_record

        rec = read_record()  # the server `ragspan evaluate` or `ragspan server start` recorded
        url = rec["url"] if rec and _healthy(rec["url"]) else None
    if not url:
        local = LOCAL_API.format(port=port)
        if not _healthy(local):
            raise NoServer("no Prefect server: set PREFECT_API_URL (a server or Prefect Cloud), or "
                           f"start one with `ragspan server start` (then PREFECT_API_URL={local})")
        url = local
    os.environ["PREFECT_API_URL"] = url
    return url


def build_deployment(workspace: Path, params_path: str, cron: str | None, tz: str,
                     index: str | None, name: str = DEPLOYMENT, schedule_index: str = "demo"):
    """The watch flow as one deployment: the cron schedule (if any) and the index-rebuilt
    trigger share it, so with its concurrency limit of 1 every run queues behind the last."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy
    from prefect.deployments.runner import EntrypointType
    from prefect.events import DeploymentEventTrigger
    from prefect.schedules import Cron
    from ragspan.flows.watch import EVENT, RESOURCE_PREFIX, event_parameters, watch

    base = {"workspace": str(workspace), "params_path": params_path}
    trigger = DeploymentEventTrigger(
        name=f"{name}-on-{EVENT}",
        expect={EVENT},
        match={"prefect.resource.id": RESOURCE_PREFIX + (index or "*")},
        parameters=event_parameters(str(workspace), params_path),
    )
    schedules = [Cron(cron, timezone=tz, parameters={**base, "trigger": "schedule", "index": schedule_index})] if cron else None
    return watch.to_deployment(
        name=name,
        schedules=schedules,
        triggers=[trigger],
        parameters={**base, "trigger": "manual"},
        concurrency_limit=ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.ENQUEUE),
        description=f"ragspan watchdog for {workspace}: evaluate after {EVENT} events"
                    + (f" and on cron {cron!r}" if cron else ""),
        tags=["ragspan"],
        enforce_parameter_schema=False,  # rendered event values arrive as str/int/None
        entrypoint_type=EntrypointType.MODULE_PATH,
    )


def event_for(index: str, version: str | None, run: str | None, revision: str | None) -> dict:
    """The index-rebuilt event as plain data (what `emit_event` gets)."""
    from ragspan.flows.watch import EVENT, RESOURCE_PREFIX

    payload = {k: v for k, v in (("version", version), ("run", run), ("revision", revision)) if v}
    return {"event": EVENT, "resource": {"prefect.resource.id": RESOURCE_PREFIX + index,
                                         "prefect.resource.name": index}, "payload": payload}
