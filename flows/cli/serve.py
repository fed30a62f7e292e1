"""The serving commands: `ragspan serve`, `server start`, `notify index-rebuilt`, `history`,
`demo-rag`. What they drive (the deployment, the API URL, the history) is flows/serve.py."""


from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from ragspan.flows.serve import (
    DEPLOYMENT,
    build_deployment,
    event_for,
    settle_api_url,
)


def _params_arg(given: str | None) -> str:
    return given or "params.yaml"


# ----- ragspan serve ---------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    from ragspan.flows.watch import load_watch_params

    url = settle_api_url(args.api_url, args.port)
    workspace = Path(args.workspace or ".").resolve()
    params = _params_arg(args.params)
    wp = load_watch_params(workspace / params)
    cron = args.cron if args.cron is not None else wp.schedule.cron
    # Runner children (one process per flow run) must agree on the state dir.
    from ragspan.tasks.config import state_dir

    os.environ["RAGSPAN_HOME"] = str(state_dir())
    from prefect import serve

    dep = build_deployment(workspace, params, cron or None, args.timezone or wp.schedule.timezone,
                           args.index, args.name, wp.rag.index)
    print(f"ragspan serve: deployment watch/{args.name} on {url}; trigger ragspan.index.rebuilt "
          f"({'ragspan.index.' + (args.index or '*')}); schedule {cron or 'none'}; SIGTERM stops it",
          flush=True)
    # The runner handles SIGTERM: it stops polling and cancels in-flight runs (their outputs
    # are atomic: the previous results stay). query_seconds bounds event → run start.
    from ragspan.tasks.supervision import local_server

    with local_server.in_use():  # a recorded local server never idles out under a serving runner
        serve(dep, print_starting_message=False, query_seconds=args.poll)
    return 0


# ----- ragspan server start | status | stop --------------------------------------------------


def cmd_server_start(args: argparse.Namespace) -> int:
    """`prefect server start` with PREFECT_HOME under the state dir (SQLite there), recorded
    in `<state>/server/server.json` so later commands use it (tasks/supervision/local_server.py).
    SIGTERM/SIGINT are passed on; with --idle-stop it also stops once idle. The exit code
    is the server's."""
    from ragspan.tasks.supervision import local_server, server_template

    home = os.environ["PREFECT_HOME"]
    running = local_server.read_record()
    if running and local_server.healthy(running["url"]):
        print(f"ragspan server: already running at {running['url']} (pid {running['pid']}); "
              "`ragspan server stop` stops it", file=sys.stderr)
        return 1
    prefect_bin = shutil.which("prefect", path=str(Path(sys.executable).parent)) or "prefect"
    cmd = [prefect_bin, "server", "start", "--host", args.host, "--port", str(args.port)]
    print(f"ragspan server: {' '.join(cmd)} (PREFECT_HOME={home}); "
          f"export PREFECT_API_URL=http://{args.host}:{args.port}/api", flush=True)
    env = os.environ.copy()
    # A run queued behind the deployment's concurrency limit retries after this (Prefect: 30 s).
    env.setdefault("PREFECT_SERVER_DEPLOYMENTS_CONCURRENCY_SLOT_WAIT_SECONDS", "5")
    # A fresh state dir's database starts migrated (tasks/supervision/server_template.py).
    seeded = server_template.seed(Path(home))
    if seeded:
        print(f"ragspan server: a fresh state dir, its database from {server_template.template_path()}", flush=True)
    fresh = not seeded and not (Path(home) / server_template.DATABASE).exists()
    proc = subprocess.Popen(cmd, env=env, preexec_fn=_die_with_parent)  # noqa: PLW1509 - Linux prctl only
    record = local_server.write_record(os.getpid(), args.port, args.host, args.idle_stop)
    started = record["started"]
    if fresh:  # the first answer of a server on a database migrated here: keep it as the template
        while proc.poll() is None and time.time() - started < 120 and not local_server.healthy(record["url"], 0.5):
            time.sleep(0.05)
        server_template.keep(Path(home))
    asked: list[int] = []

    def forward(signum, _frame):
        asked.append(signum)
        if proc.poll() is None:
            proc.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    try:
        while True:
            try:
                code = proc.wait(timeout=5)
                break
            except subprocess.TimeoutExpired:
                if args.idle_stop and not asked and local_server.is_idle(args.idle_stop, started):
                    print(f"ragspan server: idle for {args.idle_stop:.0f} s, stopping", flush=True)
                    forward(signal.SIGTERM, None)
    finally:
        local_server.clear_record(os.getpid())
    # Prefect exits with a non-zero code even when it shut down cleanly on our signal.
    return 0 if asked else code


def _die_with_parent() -> None:
    """In the Prefect server's process: get SIGTERM when `ragspan server start` dies, so a
    killed supervisor never leaves an orphaned server behind (Linux; elsewhere a no-op)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def cmd_server_status(args: argparse.Namespace) -> int:
    from ragspan.tasks.supervision import local_server

    rec = local_server.read_record()
    if rec is None:
        print(f"no ragspan server running for {local_server.server_dir().parent} "
              "(the next `ragspan evaluate` starts one)")
        return 1
    up = local_server.healthy(rec["url"])
    try:
        idle = time.time() - max(rec["started"], local_server.in_use_path().stat().st_mtime)
    except OSError:
        idle = time.time() - rec["started"]
    stop_after = f"stops after {rec['idle_stop_s']:.0f} s idle" if rec.get("idle_stop_s") else "runs until stopped"
    info = {**rec, "healthy": up, "uptime_s": round(time.time() - rec["started"], 1), "idle_s": round(idle, 1)}
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(f"ragspan server {'running' if up else 'not answering'} at {rec['url']} (pid {rec['pid']}); "
              f"up {info['uptime_s']:.0f} s, idle {info['idle_s']:.0f} s, {stop_after}\n"
              f"PREFECT_HOME={rec.get('prefect_home')}")
    return 0 if up else 1


def cmd_server_stop(args: argparse.Namespace) -> int:
    from ragspan.tasks.supervision import local_server

    rec = local_server.stop()
    print(f"stopped the ragspan server at {rec['url']} (pid {rec['pid']})" if rec else
          "no ragspan server running")
    return 0


# ----- ragspan notify index-rebuilt ------------------------------------------------------


def cmd_notify(args: argparse.Namespace) -> int:
    import asyncio

    settle_api_url(args.api_url, args.port)
    spec = event_for(args.index, args.version, args.run, args.revision)
    from prefect.events import Event
    from prefect.events.clients import get_events_client

    event = Event(event=spec["event"], resource=spec["resource"], payload=spec["payload"])

    async def send() -> None:
        async with get_events_client() as client:
            await client.emit(event)

    asyncio.run(send())
    print(f"emitted {event.event} for {spec['resource']['prefect.resource.id']} (event id {event.id})")
    return 0


# ----- ragspan history -------------------------------------------------------------------


def cmd_history(args: argparse.Namespace) -> int:
    from ragspan.tasks.reporting.history import HISTORY, history_table, read_history

    root = Path(args.workspace or ".").resolve()
    records = [r for r in read_history(root) if not args.index or r.get("index") == args.index]
    records = records[-args.limit:] if args.limit else records
    if args.json:
        print(json.dumps(records, indent=2, ensure_ascii=False))
    elif not records:
        print(f"no runs recorded in {root / HISTORY}")
    else:
        sys.stdout.write(history_table(records))
    return 0


# ----- ragspan demo-rag ------------------------------------------------------------------


def cmd_demo_rag(args: argparse.Namespace) -> int:
    from ragspan.tasks.tools.demo_rag import run_command

    return run_command(args)


def register(subparsers) -> None:
    sv = subparsers.add_parser("serve", help="serve the watch flow: cron schedule + index-rebuilt trigger")
    sv.add_argument("--cron", help="cron schedule (default: params schedule.cron; '' for none)")
    sv.add_argument("--timezone", help="schedule time zone (default: params schedule.timezone)")
    sv.add_argument("--index", help="react to this index only (default: every ragspan.index.*)")
    sv.add_argument("--name", default=DEPLOYMENT, help=f"deployment name (default: {DEPLOYMENT})")
    sv.add_argument("--workspace", help="the ragspan workspace (default: current directory)")
    sv.add_argument("--params", help="parameters file, relative to the workspace (default: params.yaml)")
    sv.add_argument("--api-url", help="Prefect API (default: PREFECT_API_URL, else the recorded local server, "
                                      "else 127.0.0.1:--port)")
    sv.add_argument("--port", type=int, default=4200, help="local server port when no URL is set")
    sv.add_argument("--poll", type=float, default=2.0,
                    help="seconds between the runner's checks for due runs (default 2; Prefect's is 10)")
    sv.set_defaults(func=cmd_serve)

    server = subparsers.add_parser(
        "server", help="the local Prefect server: start, status, stop",
        description="ragspan evaluate starts a local Prefect server on first use and reuses it "
                    "(docs/operations.md); these commands show, start and stop it.")
    ssub = server.add_subparsers(dest="server_command", required=True)
    st = ssub.add_parser("start", help="run `prefect server start` in the foreground, recorded for later commands")
    st.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    st.add_argument("--port", type=int, default=4200, help="port (default: 4200)")
    st.add_argument("--idle-stop", type=float, default=0, metavar="SECONDS",
                    help="stop once no command has used the server for this long (default: 0, never)")
    st.set_defaults(func=cmd_server_start)
    ss = ssub.add_parser("status", help="is a server running for this state dir: URL, pid, uptime, idle time")
    ss.add_argument("--json", action="store_true", help="print the status as JSON")
    ss.set_defaults(func=cmd_server_status)
    so = ssub.add_parser("stop", help="stop the server recorded for this state dir")
    so.set_defaults(func=cmd_server_stop)

    no = subparsers.add_parser("notify", help="emit an event for ragspan serve")
    nsub = no.add_subparsers(dest="notify_command", required=True)
    ir = nsub.add_parser("index-rebuilt", help="the retrieval index was rebuilt")
    ir.add_argument("--index", required=True, help="index name (resource id ragspan.index.NAME)")
    ir.add_argument("--version", help="the index version")
    ir.add_argument("--run", help="a run file the pipeline produced (relative to the served workspace)")
    ir.add_argument("--revision", help="git/DVC revision of the index build")
    ir.add_argument("--api-url", help="Prefect API (default: PREFECT_API_URL, else the recorded local server, "
                                      "else 127.0.0.1:--port)")
    ir.add_argument("--port", type=int, default=4200, help="local server port when no URL is set (default: 4200)")
    ir.set_defaults(func=cmd_notify)

    hi = subparsers.add_parser("history", help="past scheduled/triggered runs with their taxonomy rates")
    hi.add_argument("--workspace", help="the ragspan workspace whose history to show (default: current directory)")
    hi.add_argument("--index", help="only runs of this index")
    hi.add_argument("--limit", type=int, default=0, help="only the last N")
    hi.add_argument("--json", action="store_true", help="print the records as JSON")
    hi.set_defaults(func=cmd_history)

    from ragspan.tasks.tools.demo_rag_args import add_arguments

    dr = subparsers.add_parser("demo-rag", help="the demo RAG for the sample: build its index, answer")
    add_arguments(dr)
    dr.set_defaults(func=cmd_demo_rag)
