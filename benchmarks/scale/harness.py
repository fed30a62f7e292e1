"""The re-run harness of the scale benchmarks: evaluate a workspace with the real CLI, change
something, evaluate again in the same state dir, and measure each run.

    runs = [("cold", ws, work / "out-cold"), ("changed", ws / "changed", work / "out-changed")]
    rows = evaluate_in_turn(runs, home)      # {name: measurement}, the state dir's server stopped

One run is `ragspan evaluate --data DATA --run scale --out OUT --quiet` as a subprocess
with its own RAGSPAN_HOME (the state dir). Its measurement (`evaluate`):

- wall_s; cpu_s: user + system seconds of the command and every process it waited for
  (the judge's workers), not the local Prefect server it starts and leaves running;
  server_cpu_s: that server's own (its process tree, read from /proc before and after the
  run: a cold run's server starts with it, a re-run's was started by an earlier run);
- peak_rss_mb / peak_rss_largest_mb: peak RSS of its process tree and of its largest
  process (psutil, sampled every 50 ms); peak_anon_mb / peak_anon_largest_mb: the same of
  RssAnon (heap, without mapped files' pages: the corpus store and the index); load1: the load average when it ended;
- what the results directory counts: claims, labels, judge_calls, task_states and run.json's
  reuse counters (answers_reused, answers_resumed, pairs_judged, verdicts_reused, marks_rejudged,
  pairs_decided);
- steps_s: the wall seconds of each flow step (RAGSPAN_TIMINGS, flows/ledger.py;
  thread-seconds for the shard steps, two shards side by side) and before_flow_s, the
  seconds before the flow's first step (interpreter, imports, the CLI's check, server start).

On a shared machine, compare CPU seconds and ratios measured in the same sitting, not wall
seconds. run.py (the scale grid), reruns.py (unchanged re-runs) and scenarios.py (the
scenario table) all measure through here.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ragspan.tasks.reporting.results_files import read_results

RAGSPAN = str(Path(sys.executable).with_name("ragspan"))
REUSE_COUNTERS = ("answers_reused", "answers_resumed", "pairs_judged", "verdicts_reused", "marks_rejudged",
                  "pairs_decided")

API_URL: str | None = None  # a running Prefect server instead of each state dir's own (run.py --server)
# "auto": each state dir's local server, started by its cold run and reused by the re-runs
# (tasks/supervision/local_server.py); "ephemeral": Prefect's temporary server inside every process.
PREFECT_MODE = "auto"


def cli_env(home: Path, timings: Path | None = None) -> dict:
    """The environment of one CLI run: this shell's, without PREFECT_* / RAGSPAN_*, and the state dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "RAGSPAN_"))}
    env["RAGSPAN_HOME"] = str(home)
    env["RAGSPAN_PREFECT_SERVER"] = PREFECT_MODE
    if API_URL:
        env["PREFECT_API_URL"] = API_URL
    if timings is not None:
        env["RAGSPAN_TIMINGS"] = str(timings)
    return env


def anon_bytes(pid: int) -> int:
    """RssAnon: the heap and other private memory, without the pages of mapped files (the
    corpus store, the index), which the page cache can take back."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _tree_rss(p) -> tuple[int, int, int, int]:
    """RSS of the tree (sum) and of its largest process; RssAnon likewise."""
    import psutil

    total = largest = anon = anon_largest = 0
    try:
        procs = [p] + p.children(recursive=True)
    except psutil.Error:
        return 0, 0, 0, 0
    for q in procs:
        try:
            r = q.memory_info().rss
        except psutil.Error:
            continue
        a = anon_bytes(q.pid)
        total += r
        largest = max(largest, r)
        anon += a
        anon_largest = max(anon_largest, a)
    return total, largest, anon, anon_largest


def run_measured(cmd: list[str], env: dict, cwd: Path) -> dict:
    """Run `cmd`; wall time and peak RSS of its process tree (sum) and of its largest process."""
    import psutil

    t0 = time.perf_counter()
    start = time.time()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ps = psutil.Process(proc.pid)
    peak = {"tree": 0, "largest": 0, "anon": 0, "anon_largest": 0}
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            for name, value in zip(peak, _tree_rss(ps)):
                peak[name] = max(peak[name], value)
            done.wait(0.05)

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    done.set()
    t.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err[-3000:]}")
    return {"wall_s": round(wall, 2), "start": start, "peak_rss_mb": round(peak["tree"] / 2**20),
            "peak_rss_largest_mb": round(peak["largest"] / 2**20), "peak_anon_mb": round(peak["anon"] / 2**20),
            "peak_anon_largest_mb": round(peak["anon_largest"] / 2**20), "stdout": out}


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def server_cpu(home: Path) -> float:
    """User + system seconds used so far by the local Prefect server of the state dir `home`
    and its children (0 when none runs): tasks/supervision/local_server.py's record names it."""
    import psutil

    try:
        pid = int(json.loads((Path(home) / "server" / "server.json").read_text(encoding="utf-8"))["pid"])
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        return 0.0
    total = 0.0
    for q in procs:
        try:
            t = q.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def _step_seconds(timings: Path) -> tuple[dict[str, float], float | None]:
    """({step: seconds summed over its calls}, the first step's start) from RAGSPAN_TIMINGS."""
    recs = [json.loads(line) for line in timings.read_text().splitlines()] if timings.exists() else []
    steps: dict[str, float] = {}
    for rec in recs:
        steps[rec["step"]] = steps.get(rec["step"], 0.0) + rec["seconds"]
    return {k: round(v, 2) for k, v in steps.items()}, min((rec["start"] for rec in recs), default=None)


def evaluate(data: Path, home: Path, out: Path, runner: str | None = None, ragspan: str = RAGSPAN) -> dict:
    """One CLI run of the workspace `data` in the state dir `home`, results to `out`, measured."""
    timings = out.with_name(out.name + "-timings.jsonl")
    timings.unlink(missing_ok=True)
    cmd = [ragspan, "evaluate", "--data", str(data), "--run", "scale", "--out", str(out), "--quiet"]
    if runner:
        cmd += ["--task-runner", runner]
    cpu, server = _children_cpu(), server_cpu(home)
    r = run_measured(cmd, cli_env(home, timings), data)
    r["cpu_s"] = round(_children_cpu() - cpu, 2)
    r["server_cpu_s"] = round(server_cpu(home) - server, 2)
    r["load1"] = round(os.getloadavg()[0], 1)
    r.pop("stdout")
    m = read_results(out)
    judge = m["judge"]
    r.update(claims=m["claims"], labels={k: v["count"] for k, v in m["labels"].items()},
             judge_calls=judge.get("calls", 0), task_states=judge.get("task_states", {}),
             **{k: judge.get(k, 0) for k in REUSE_COUNTERS})
    r["steps_s"], first = _step_seconds(timings)
    if first is not None:
        r["before_flow_s"] = round(first - r["start"], 2)
    return r


def stop_server(home: Path, ragspan: str = RAGSPAN) -> None:
    """Stop the local Prefect server the state dir's runs started (none: nothing happens)."""
    subprocess.run([ragspan, "server", "stop"], env=cli_env(home), capture_output=True, check=False)


Run = tuple[str, Path, Path]  # (name, workspace, results directory)


def evaluate_in_turn(runs: Sequence[Run], home: Path, runner: str | None = None, ragspan: str = RAGSPAN,
                     progress: Callable[[str, dict], None] | None = None) -> dict[str, dict]:
    """Each run in order in the one state dir `home` (the first on a fresh one is the cold
    run; the others reuse what it left), measured; then the state dir's server is stopped."""
    rows: dict[str, dict] = {}
    try:
        for name, data, out in runs:
            rows[name] = evaluate(Path(data).resolve(), Path(home).resolve(), Path(out).resolve(), runner, ragspan)
            if progress is not None:
                progress(name, rows[name])
    finally:
        stop_server(home, ragspan)
    return rows
