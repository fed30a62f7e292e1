"""The Prefect server the command line uses when none is configured: started on first use,
reused by later runs, stopped by `ragspan server stop` or after it has been idle.

Why: with PREFECT_API_URL unset, Prefect starts a temporary server inside every process
(5–10 s each time, docs/stack.md); against a running server a whole `ragspan evaluate`
of an unchanged workspace takes ~3 s. So the first run starts `ragspan server start
--idle-stop N` in the background (its own session, output in `<state>/server/server.log`)
and every later run of the same state dir finds it through `<state>/server/server.json`.

- Configured servers win: PREFECT_API_URL (or Prefect settings already pointing at an
  API, as in tests) is used as is.
- `RAGSPAN_PREFECT_SERVER=ephemeral` keeps Prefect's per-process temporary server;
  `RAGSPAN_SERVER_IDLE_STOP` (seconds, default 900) sets how long a started server waits.
- Idle means: no command holds `in-use.lock` (each run holds it shared) and none has
  touched it for the idle time. A long evaluation therefore never loses its server.
- Two commands starting at once start one server (`start.lock`).

Standard library only: it runs before Prefect is imported (Prefect reads the API URL once).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from ragspan.tasks.state import file_lock, pid_alive, state_path

MODE_ENV, IDLE_ENV = "RAGSPAN_PREFECT_SERVER", "RAGSPAN_SERVER_IDLE_STOP"
DEFAULT_IDLE_STOP_S = 900
START_TIMEOUT_S = 90.0


def server_dir() -> Path:
    return state_path("server")


def record_path() -> Path:
    return server_dir() / "server.json"


def in_use_path() -> Path:
    return server_dir() / "in-use.lock"


def healthy(api_url: str, timeout: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(api_url.rstrip("/") + "/health", timeout=timeout) as resp:
            return resp.status == 200
    except (OSError, ValueError):
        return False


def read_record() -> dict | None:
    """The recorded server, if its process is still alive (a stale record is removed)."""
    try:
        rec = json.loads(record_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or not pid_alive(int(rec.get("pid", 0) or 0)):
        with contextlib.suppress(OSError):
            record_path().unlink()
        return None
    return rec


def write_record(pid: int, port: int, host: str, idle_stop: float) -> dict:
    rec = {"pid": pid, "url": f"http://{host}:{port}/api", "host": host, "port": port,
           "started": time.time(), "idle_stop_s": idle_stop,
           "prefect_home": os.environ.get("PREFECT_HOME")}
    server_dir().mkdir(parents=True, exist_ok=True)
    tmp = record_path().with_suffix(".tmp")
    tmp.write_text(json.dumps(rec, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, record_path())
    return rec


def clear_record(pid: int) -> None:
    rec = None
    with contextlib.suppress(OSError, ValueError):
        rec = json.loads(record_path().read_text(encoding="utf-8"))
    if isinstance(rec, dict) and rec.get("pid") == pid:
        with contextlib.suppress(OSError):
            record_path().unlink()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def idle_stop_seconds() -> float:
    try:
        return float(os.environ.get(IDLE_ENV, DEFAULT_IDLE_STOP_S))
    except ValueError:
        return float(DEFAULT_IDLE_STOP_S)


@contextlib.contextmanager
def in_use() -> Iterator[None]:
    """Held (shared) by every command using the server: the server is not idle meanwhile."""
    path = in_use_path()
    with file_lock(path, "shared", open_mode="a+"):
        os.utime(path)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.utime(path)


def is_idle(idle_stop: float, since: float) -> bool:
    """No command holds the server and none has used it for `idle_stop` seconds (counted
    from `since`, the server's start, when no command has used it yet)."""
    path = in_use_path()
    try:
        last = max(since, path.stat().st_mtime)
    except OSError:
        last = since
    if time.time() - last < idle_stop:
        return False
    with file_lock(path, wait=False, open_mode="a+") as free:
        return free is not None


def _prefect_configured() -> str | None:
    """An API URL already configured: the environment, or Prefect's settings when Prefect
    is already imported (a test harness, a notebook)."""
    if os.environ.get("PREFECT_API_URL"):
        return os.environ["PREFECT_API_URL"]
    if "prefect.settings" in sys.modules:
        with contextlib.suppress(Exception):
            from prefect.settings import get_current_settings

            url = get_current_settings().api.url
            return str(url) if url else None
    return None


def ensure_server(log=lambda _msg: None) -> tuple[str | None, str]:
    """The API URL the command should use and how it was found: ("…", "configured"),
    ("…", "reused"), ("…", "started"), or (None, "ephemeral") for Prefect's temporary one.
    Sets PREFECT_API_URL for this process (and the task runner's workers)."""
    configured = _prefect_configured()
    if configured:
        return configured, "configured"
    if os.environ.get(MODE_ENV, "auto") == "ephemeral":
        return None, "ephemeral"
    rec = read_record()
    if rec and healthy(rec["url"]):
        os.environ["PREFECT_API_URL"] = rec["url"]
        return rec["url"], "reused"
    with file_lock(server_dir() / "start.lock", open_mode="a+"):
        rec, proc = read_record(), None  # another command may have started one meanwhile
        if rec is None:
            rec, proc = _spawn(log)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and (proc.poll() is None if proc else pid_alive(rec["pid"])):
            if healthy(rec["url"]):
                os.environ["PREFECT_API_URL"] = rec["url"]
                return rec["url"], "started"
            time.sleep(0.2)
    log(f"the local Prefect server did not start (see {server_dir() / 'server.log'}); "
        "using a temporary one for this run")
    return None, "ephemeral"


def _spawn(log) -> tuple[dict, subprocess.Popen]:
    """Start `ragspan server start --idle-stop N` detached; its record once written."""
    port, idle = free_port(), idle_stop_seconds()
    server_dir().mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "ragspan.flows.cli", "server", "start", "--port", str(port),
           "--idle-stop", str(idle)]
    log(f"starting a local Prefect server on 127.0.0.1:{port} (stops after {idle:.0f} s idle; "
        "`ragspan server stop` stops it now)")
    with open(server_dir() / "server.log", "ab") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True, env=os.environ.copy())
    # The child writes its own record at once; wait for it so the URL is the child's.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        rec = read_record()
        if rec and rec.get("pid") == proc.pid:
            return rec, proc
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    return {"pid": proc.pid, "url": f"http://127.0.0.1:{port}/api"}, proc


def stop(timeout: float = 20.0) -> dict | None:
    """Stop the recorded server (SIGTERM, then SIGKILL after `timeout`); its record, or None."""
    rec = read_record()
    if rec is None:
        return None
    pid = int(rec["pid"])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and pid_alive(pid):
        time.sleep(0.1)
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    clear_record(pid)
    return rec
