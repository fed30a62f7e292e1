"""Real servers for end-to-end tests: a `prefect server` (via `ragspan server start`) on a
free 127.0.0.1 port, and helpers to wait for things and stop processes by PID."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

BIN = Path(sys.executable).parent
# `ragspan` as a subprocess, with every command module registered (serve, compare).
CLI = ("import sys, ragspan.flows.cli as c; c._COMMAND_MODULES = tuple(dict.fromkeys("
       "(*c._COMMAND_MODULES, 'ragspan.flows.cli.serve', 'ragspan.flows.cli.compare'))); "
       "sys.exit(c.main(sys.argv[1:]))")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout: float, what: str, step: float = 0.3):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def healthy(api: str) -> bool:
    try:
        with urllib.request.urlopen(api + "/health", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def stop(proc: subprocess.Popen, timeout: float = 60) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(timeout=10)


def clean_env(tmp: Path) -> dict[str, str]:
    """The environment a user's shell would have: no test-wide Prefect/ragspan/DVC/git
    settings, git and DVC configs of their own under `tmp`."""
    (tmp / "gitconfig").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "DVC_", "PREFECT_", "RAGSPAN_"))}
    env.update({
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "DVC_NO_ANALYTICS": "1",
        "DVC_SITE_CACHE_DIR": str(tmp / "dvc-site"), "DVC_GLOBAL_CONFIG_DIR": str(tmp / "dvc-g"),
        "DVC_SYSTEM_CONFIG_DIR": str(tmp / "dvc-s"), "GIT_CONFIG_GLOBAL": str(tmp / "gitconfig"),
        "GIT_CONFIG_NOSYSTEM": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
    })
    return env


@contextlib.contextmanager
def prefect_server(tmp: Path, env: dict[str, str], cwd: Path) -> Iterator[str]:
    """`ragspan server start` on a free port (its own PREFECT_HOME under `tmp`); yields the
    API URL; stops the server by PID."""
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    log = open(tmp / f"prefect-server-{port}.log", "w")  # noqa: SIM115
    server = subprocess.Popen([sys.executable, "-c", CLI, "server", "start", "--port", str(port)], cwd=cwd,
                              env={**env, "PREFECT_HOME": str(tmp / f"prefect-home-{port}")},
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: healthy(api) or server.poll() is not None, 120, "the Prefect server")
        assert server.poll() is None, (tmp / f"prefect-server-{port}.log").read_text()[-3000:]
        yield api
    finally:
        stop(server)
        log.close()


def api_call(api: str, coro_fn):
    """Run one prefect-client call against `api` (Prefect's settings are fixed at import)."""
    from prefect.client.orchestration import PrefectClient

    async def go():
        async with PrefectClient(api=api) as client:
            return await coro_fn(client)

    return asyncio.run(go())


def artifacts(api: str, key: str) -> list:
    """Every artifact under `key`, oldest first."""
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    async def read(client):
        return await client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
                                           sort=ArtifactSort.CREATED_DESC)
    return list(reversed(api_call(api, read)))
