"""The local Prefect server's start on a fresh state dir: CPU and seconds until its API answers.

    .venv/bin/python -m benchmarks.scale.server_start --runs 2
    .venv/bin/python -m benchmarks.scale.server_start --runs 1 --no-template   # the first server on a machine

Each run starts `ragspan server start` (this checkout's) on a new, empty RAGSPAN_HOME,
polls `/health` every 0.1 s, and reads the CPU (user + system) of the supervisor and the
Prefect server it started (`harness.server_cpu`, by the state dir's server record) when the API first answers, then stops it.
`--no-template` gives the server an empty user cache dir (XDG_CACHE_HOME), as on a machine
where no ragspan server ever ran: it migrates its database and keeps the template
(tasks/supervision/server_template.py). By default the user's own cache dir is used: after
any earlier server on the machine, a fresh state dir starts from the template.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from ragspan.tasks.supervision.local_server import free_port

from benchmarks.scale.harness import server_cpu

RAGSPAN = str(Path(sys.executable).with_name("ragspan"))


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except OSError:
        return False


def one_start(work: Path, no_template: bool) -> dict:
    """CPU-s and wall seconds of one server start on a fresh state dir under `work`."""
    home = Path(tempfile.mkdtemp(prefix="state-", dir=work))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "RAGSPAN_"))}
    env["RAGSPAN_HOME"] = str(home)
    if no_template:
        env["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="cache-", dir=work)
    port = free_port()
    started = time.monotonic()
    proc = subprocess.Popen([RAGSPAN, "server", "start", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not _answers(f"http://127.0.0.1:{port}/api/health"):
            if proc.poll() is not None or time.monotonic() - started > 180:
                raise SystemExit(f"the server did not start (see {home / 'server'})")
            time.sleep(0.1)
        return {"wall_s": round(time.monotonic() - started, 2), "cpu_s": round(server_cpu(home), 2),
                "no_template": no_template}
    finally:
        subprocess.run([RAGSPAN, "server", "stop"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--no-template", action="store_true", help="an empty user cache dir (no database template)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="server-start-") as work:
        rows = [one_start(Path(work), a.no_template) for _ in range(a.runs)]
    for row in rows:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
