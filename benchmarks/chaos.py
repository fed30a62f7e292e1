"""Chaos benchmark: what a scheduled run meets, at a random moment, and what is left after.

    .venv/bin/python -m benchmarks.chaos                      # 30 trials, small workspace, minutes
    .venv/bin/python -m benchmarks.chaos --trials 60 --seed 7
    .venv/bin/python -m benchmarks.chaos --size large         # 100k chunks x 10k answers (long)
    .venv/bin/python -m benchmarks.chaos --ws WS --kills 4    # kills in preparation
                                                              # and update at scale: benchmarks/chaos_big.py

Real parts only: the real `ragspan evaluate` CLI as a subprocess, a real `prefect server
start` on a fixed local port, and the judge `openai` over real HTTP to the scripted
OpenAI-compatible server the tests also use (`benchmarks/_support/fake_openai_server.py`,
as a process on a fixed port, so a restart keeps the judge's URL and its cache keys). The workspace comes
from the scale benchmark's generator (benchmarks/scale/generate.py).

First a clean run (model `m-ref`) writes the results and gives the reference diagnoses;
a second one (model `m-cal`, a new judge context: what a trial's run does) gives T', the
span over which fault moments are drawn. Then each trial (seeded) picks a fault and a moment
(a timed fault may still come after a fast run has ended: `fault_hit_running_run`, and the
exit times are summarised over the faults that met a running run):

| fault | what | when |
|---|---|---|
| kill-evaluate | SIGKILL of the `ragspan evaluate` process | a random moment in [0.05, 0.95] T' |
| kill-prefect | SIGKILL of the Prefect server (its process group) | same |
| stop-prefect | SIGSTOP of the Prefect server (SIGCONT once evaluate exited) | same |
| kill-judge | SIGKILL of the judge's server | same |
| corrupt-store | a random file of a random store of the state dir damaged (bytes inverted or truncated) | before the run |
| no-space | a file-size limit (RLIMIT_FSIZE in the child, SIGXFSZ ignored: writes fail with EFBIG, as with ENOSPC) of a random size below the largest file written | the write that crosses it, in whichever store (tasks/state/_store.py `REGISTRY`) |
| concurrent | a second `ragspan evaluate` on the same --out | same as the kills |

A trial's run uses a new judge model name (`m<trial>`: a new context for every cache, so
the run really calls the judge, builds, stores) — except corrupt-store, which reruns the
previous trial's model so the damaged caches are the ones it reads. After the fault:
seconds from the fault until evaluate exited (from its start for corrupt-store and
no-space), its exit code, processes of its session still alive 30 s after it exited,
whether a traceback was printed, whether the previous results are intact (readable, and
byte for byte the previous ones or a whole new set of files), then the servers are
restored and the next run (same model, no fault) is compared with the reference
diagnoses. After a no-space trial, every store of the state dir is checked as it stands:
a full disk must leave each as it was — nothing moved aside to `damaged/` (`moved_aside`),
every registered store still listed by `ragspan cache stats --json` (`stores_listed`) — and
the next run must reuse them. Prints a table; writes benchmarks/results/chaos.json (or --name).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
from benchmarks.scale.generate import write_workspace

BIN = Path(sys.executable).parent
RAGSPAN = str(BIN / "ragspan")
FAKE_JUDGE = ROOT / "benchmarks" / "_support" / "fake_openai_server.py"
FAULTS = ("kill-evaluate", "kill-prefect", "stop-prefect", "kill-judge", "corrupt-store", "no-space", "concurrent")
TIMED = ("kill-evaluate", "kill-prefect", "stop-prefect", "kill-judge", "concurrent")
SIZES = {"small": (400, 40), "large": (100_000, 10_000)}
STORES = ("index", "answers", "inputs", "step-results", "judge-cache", "verdict-cache", "reports", "digests")
RUN_TIMEOUT = 600.0  # a run still alive after this is counted as hung, and killed
ALIVE_AFTER = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


class Server:
    """A server process in its own session, on a fixed port: kill, stop and restart it."""

    def __init__(self, name: str, cmd: list[str], health: str, env: dict, log: Path) -> None:
        self.name, self.cmd, self.health, self.env, self.log = name, cmd, health, env, log
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 180.0) -> None:
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(self.cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while not answers(self.health):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start: see {self.log}")
            time.sleep(0.3)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def ensure_up(self) -> None:
        """After a fault: continue a stopped server, restart a killed one."""
        self.signal(signal.SIGCONT)
        if self.proc is not None and self.proc.poll() is None and answers(self.health):
            return
        self.stop()
        self.start()

    def stop(self) -> None:
        if self.proc is None:
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        for pid in session_pids(self.proc.pid):  # whatever it left in its session
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def session_pids(sid: int) -> list[int]:
    """Live processes of session `sid` (every process a run started in its session)."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[3]) == sid:  # state, ppid, pgrp, session
            found.append(int(d.name))
    return found


def snapshot(out: Path) -> dict[str, str]:
    if not out.is_dir():
        return {}
    return {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*")) if p.is_file()}


def diagnoses(out: Path) -> list[tuple] | None:
    import pandas as pd

    try:
        d = pd.read_parquet(out / "diagnoses.parquet")
        json.loads((out / "metrics.json").read_text())
    except Exception:  # noqa: BLE001 — unreadable results are what this measures
        return None
    cols = ["claim_id", "label", "doc_id", "char_start", "char_end", "source_conflict"]
    return [tuple(None if pd.isna(v) else v for v in row) for row in d[cols].itertuples(index=False)]


class Bench:
    def __init__(self, work: Path, ws: Path, seed: int, local_judge: bool = False) -> None:
        self.work, self.ws, self.rng = work, ws, random.Random(seed)
        self.local_judge = local_judge  # the big-workspace scenarios: the default local judge, no judge server
        self.state, self.out = work / "state", work / "results" / "run"
        prefect_port, judge_port = free_port(), free_port()
        self.api = f"http://127.0.0.1:{prefect_port}/api"
        self.judge_url = f"http://127.0.0.1:{judge_port}/v1"
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "RAGSPAN_"))}
        quiet = {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
                 "PREFECT_SERVER_LOGGING_LEVEL": "CRITICAL", "PREFECT_LOGGING_LEVEL": "WARNING"}
        self.prefect = Server(
            "prefect server", [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port",
                               str(prefect_port)], self.api + "/health",
            {**base, **quiet, "PREFECT_HOME": str(work / "prefect-server"),
             "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED": "false"}, work / "prefect-server.log")
        self.judge = Server("judge server", [sys.executable, str(FAKE_JUDGE), "--port", str(judge_port)],
                            self.judge_url + "/models", base, work / "judge-server.log")
        self.env = {**base, **quiet, "RAGSPAN_HOME": str(self.state), "PREFECT_API_URL": self.api,
                    "PREFECT_HOME": str(work / "prefect-client")}
        self.reference: list[tuple] | None = None
        self.ref_s = self.fault_s = 0.0
        self.runs = 0

    # -- runs ------------------------------------------------------------------------------

    def start_run(self, model: str, limit: int = 0, data: Path | None = None, out: Path | None = None,
                  timings: Path | None = None) -> tuple[subprocess.Popen, Path]:
        """`ragspan evaluate` of `data` (default the workspace) to `out` (default the results
        dir) in its own session; RAGSPAN_TIMINGS to `timings` when given."""
        self.runs += 1
        err = self.work / "logs" / f"run-{self.runs:03d}.stderr"
        err.parent.mkdir(exist_ok=True)

        def child() -> None:
            if limit:
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past it fail with EFBIG
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

        cmd = [RAGSPAN, "evaluate", "--data", str(data or self.ws), "--run", "scale", "--out", str(out or self.out),
               "--quiet"]
        if not self.local_judge:
            cmd += ["--judge", "openai", "--model", model, "--base-url", self.judge_url]
        env = self.env if timings is None else {**self.env, "RAGSPAN_TIMINGS": str(timings)}
        with open(err, "w") as fh:
            proc = subprocess.Popen(cmd, env=env, cwd=self.work, stdout=subprocess.DEVNULL, stderr=fh,
                                    start_new_session=True, preexec_fn=child)  # noqa: PLW1509 (no threads here)
        return proc, err

    def wait(self, proc: subprocess.Popen) -> tuple[int | None, float]:
        try:
            code = proc.wait(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None  # hung
        return code, time.monotonic()

    def clean_run(self, model: str) -> tuple[int | None, float, list[tuple] | None, str]:
        t0 = time.monotonic()
        proc, err = self.start_run(model)
        code, t1 = self.wait(proc)
        return code, t1 - t0, diagnoses(self.out), err.read_text()

    @staticmethod
    def left_alive(sid: int) -> int:
        deadline = time.monotonic() + ALIVE_AFTER
        while time.monotonic() < deadline:
            if not session_pids(sid):
                return 0
            time.sleep(0.5)
        alive = session_pids(sid)
        for pid in alive:  # counted, then cleaned up so the next trial starts clean
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(alive)

    def moved_aside(self) -> int:
        damaged = self.state / "damaged"
        return len(list(damaged.iterdir())) if damaged.is_dir() else 0

    def stores_listed(self) -> bool:
        """`ragspan cache stats --json` lists every registered store (it opens each one)."""
        from ragspan.tasks.state import REGISTRY

        proc = subprocess.run([RAGSPAN, "cache", "stats", "--json"], env=self.env, cwd=self.work,
                              capture_output=True, text=True, timeout=120, check=False)
        try:
            return proc.returncode == 0 and set(REGISTRY) <= set(json.loads(proc.stdout))
        except ValueError:
            return False

    # -- faults ----------------------------------------------------------------------------

    def corrupt(self) -> tuple[str, str]:
        """Damage one random file of a random store: bytes in the middle inverted, or the
        file cut in half. Returns (store, file)."""
        stores = {
            "index": [p for p in (self.state / "index").rglob("*") if p.is_file()],
            "answers": [p for p in (self.state / "answers").rglob("seg-*/*") if p.is_file()],
            "inputs": list((self.state / "inputs").glob("*.pickle")),
            "step-results": [p for p in (self.state / "prefect" / "results").glob("*") if p.is_file()
                             and not p.name.startswith(".")],
            "judge-cache": [self.state / "judge-cache.sqlite"] if (self.state / "judge-cache.sqlite").exists() else [],
            "verdict-cache": [p for p in [self.state / "verdict-cache.sqlite"] if p.exists()],
            "reports": [p for p in (self.state / "reports").rglob("*") if p.is_file()],
            "digests": [p for p in [self.state / "digests.json"] if p.exists()],
        }
        store = self.rng.choice([s for s in STORES if stores[s]])
        path = self.rng.choice(sorted(stores[store]))
        blob = bytearray(path.read_bytes())
        if self.rng.random() < 0.5 and len(blob) > 1:
            blob = blob[: len(blob) // 2]
        else:
            at = self.rng.randrange(len(blob) // 4, max(len(blob) // 4 + 1, 3 * len(blob) // 4))
            n = min(256, len(blob) - at)
            blob[at:at + n] = bytes(b ^ 0xFF for b in blob[at:at + n])
        path.write_bytes(bytes(blob))
        return store, str(path.relative_to(self.state))

    def trial(self, i: int, fault: str, prev_model: str) -> dict:
        model = prev_model if fault == "corrupt-store" else f"m{i}"
        before = snapshot(self.out)
        rec: dict = {"trial": i, "fault": fault, "model": model}
        limit = 0
        if fault == "corrupt-store":
            rec["store"], rec["file"] = self.corrupt()
        if fault == "no-space":
            largest = max((p.stat().st_size for p in self.out.rglob("*") if p.is_file()), default=10**6)
            limit = self.rng.randint(2_000, largest)
            rec["limit_bytes"] = limit
        aside = self.moved_aside()
        t0 = time.monotonic()
        proc, err = self.start_run(model, limit)
        fault_at = t0
        second = None
        if fault in TIMED:
            moment = self.rng.uniform(0.05, 0.95) * self.fault_s
            rec["moment_s"] = round(moment, 2)
            while proc.poll() is None and time.monotonic() - t0 < moment:
                time.sleep(0.05)
            fault_at = time.monotonic()
            rec["fault_hit_running_run"] = proc.poll() is None
            if fault == "kill-evaluate":
                try:
                    os.kill(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            elif fault == "kill-prefect":
                self.prefect.signal(signal.SIGKILL)
            elif fault == "stop-prefect":
                self.prefect.signal(signal.SIGSTOP)
            elif fault == "kill-judge":
                self.judge.signal(signal.SIGKILL)
            elif fault == "concurrent":
                second = self.start_run(model)
        code, ended = self.wait(proc)
        rec["exit_code"], rec["exit_s"] = code, round(ended - fault_at, 2)
        rec["alive_after_30s"] = self.left_alive(proc.pid)
        text = err.read_text(errors="replace")
        if second is not None:
            code2, _ = self.wait(second[0])
            rec["alive_after_30s"] += self.left_alive(second[0].pid)
            text2 = second[1].read_text(errors="replace")
            rec["second_exit_code"] = code2
            rec["second_stderr"] = text2.strip().splitlines()[-1:] if text2.strip() else []
            text += text2
        rec["traceback"] = "Traceback" in text
        if fault == "no-space":  # a full disk is never damage: every store as it was
            rec["moved_aside"] = self.moved_aside() - aside
            rec["stores_listed"] = self.stores_listed()
        rec["stderr_lines"] = [line for line in text.splitlines() if line.startswith(("error:", "warning:"))][:6]
        self.prefect.ensure_up()
        self.judge.ensure_up()
        got = diagnoses(self.out)
        after = snapshot(self.out)
        # Intact: readable, and byte for byte the previous results or a whole new set
        # (atomic writes: a run may finish writing and fail after, e.g. on the Prefect API).
        rec["previous_kept"] = after == before
        rec["intact"] = got is not None and (after == before or set(after) >= set(before))
        ncode, nsecs, nd, nerr = self.clean_run(model)
        rec["next_exit_code"], rec["next_s"] = ncode, round(nsecs, 2)
        rec["next_identical"] = ncode == 0 and nd == self.reference
        rec["next_traceback"] = "Traceback" in nerr
        if not rec["next_identical"]:
            rec["next_stderr"] = nerr.strip().splitlines()[-3:]
        return rec


def hit(r: dict) -> bool:
    """The fault met a running run (a timed fault may come after the run already ended)."""
    return r.get("fault_hit_running_run", True)


def summary(rows: list[dict]) -> dict:
    exits = [r["exit_s"] for r in rows if hit(r)]  # fault → exit; from the start for corrupt/no-space
    return {
        "trials": len(rows),
        "faults": {f: sum(r["fault"] == f for r in rows) for f in FAULTS},
        "hit_running_run": sum(hit(r) for r in rows),
        "exit_s_median": round(statistics.median(exits), 2) if exits else None,
        "exit_s_max": max(exits) if exits else None,
        "hung": sum(r["exit_code"] is None for r in rows),
        "intact": sum(r["intact"] for r in rows),
        "next_identical": sum(r["next_identical"] for r in rows),
        "alive_after_30s": sum(r["alive_after_30s"] for r in rows),
        "tracebacks": sum(r["traceback"] or r["next_traceback"] for r in rows),
        "no_space_moved_aside": sum(r.get("moved_aside", 0) for r in rows),
        "no_space_stores_listed": sum(r.get("stores_listed", False) for r in rows),
    }


def table(rows: list[dict], s: dict) -> str:
    lines = [(f"{'#':>3} {'fault':<14} {'moment':>7} {'exit':>5} {'exit s':>7} {'alive':>5} {'intact':>6} "
             f"{'next=':>5} {'tb':>3}  detail")]
    for r in rows:
        moment = f"{r['moment_s']:.1f}" if "moment_s" in r else ("-" if "limit_bytes" not in r
                                                                  else f"{r['limit_bytes'] // 1000}k")
        detail = r.get("store", "") + (" " + r["stderr_lines"][-1][:70] if r["stderr_lines"] else "")
        lines.append(f"{r['trial']:>3} {r['fault']:<14} {moment:>7} {r['exit_code']!s:>5} {r['exit_s']:>7.1f} "
                     f"{r['alive_after_30s']:>5} {r['intact']!s:>6} {r['next_identical']!s:>5} "
                     f"{'y' if r['traceback'] else '-':>3}  {detail.strip()}")
    per = ", ".join(f"{k} {v}" for k, v in s["faults"].items() if v)
    lines += ["", f"trials {s['trials']} ({per})",
              (f"faults that met a running run: {s['hit_running_run']}/{s['trials']} · exit after the fault "
              f"(those): median {s['exit_s_median']} s, max {s['exit_s_max']} s, hung {s['hung']}"),
              (f"previous results intact: {s['intact']}/{s['trials']} · next run identical to the clean run: "
              f"{s['next_identical']}/{s['trials']} · processes alive 30 s after exit: {s['alive_after_30s']} · "
              f"tracebacks: {s['tracebacks']}"),
              (f"no-space: stores moved aside {s['no_space_moved_aside']} (must be 0) · every store listed "
               f"after: {s['no_space_stores_listed']}/{s['faults'].get('no-space', 0)}")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--size", choices=sorted(SIZES), default="small",
                    help="workspace: small (400 chunks x 40 answers) or large (100k x 10k)")
    ap.add_argument("--chunks", type=int, help="override the size's chunks")
    ap.add_argument("--answers", type=int, help="override the size's answers")
    ap.add_argument("--faults", default=",".join(FAULTS), help="comma-separated subset to draw from")
    ap.add_argument("--work", help="workspace, state and logs (default: a temporary directory, removed after)")
    ap.add_argument("--name", default=None, help="results file benchmarks/results/NAME.json (default chaos, "
                    "or chaos-big with --ws)")
    ap.add_argument("--json", type=Path, help="write the results here instead of benchmarks/results/")
    ap.add_argument("--ws", type=Path, help="the big-workspace scenarios on this generate.py workspace instead: "
                    "kills during preparation and during the incremental update (benchmarks/chaos_big.py)")
    ap.add_argument("--prefect-api", help="with --ws: a running Prefect server's API URL instead of starting one")
    ap.add_argument("--kills", type=int, default=4, help="with --ws: how many kills (the kinds in turn)")
    ap.add_argument("--kinds", default="preparation,update,store",
                    help="with --ws: the kinds of kill, in turn (benchmarks/chaos_big.py KINDS)")
    a = ap.parse_args(argv)
    if a.ws:
        return big_main(a)
    chunks, n_answers = SIZES[a.size]
    chunks, n_answers = a.chunks or chunks, a.answers or n_answers
    faults = tuple(f for f in a.faults.split(",") if f)
    assert set(faults) <= set(FAULTS), f"unknown fault in {faults}"
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="ragspan-chaos-"))
    work.mkdir(parents=True, exist_ok=True)
    ws = work / "ws"
    info = json.loads((ws / "info.json").read_text()) if (ws / "info.json").exists() \
        else write_workspace(ws, chunks, n_answers, seed=a.seed)
    bench = Bench(work, ws, a.seed)
    t_start = time.monotonic()
    rows: list[dict] = []
    try:
        bench.prefect.start()
        bench.judge.start()
        code, secs, ref, err = bench.clean_run("m-ref")
        if code != 0 or ref is None:
            print(err, file=sys.stderr)
            return 1
        bench.reference, bench.ref_s = ref, secs
        # What a trial's run takes (a new judge model; index and inputs already there): the
        # moments of the timed faults are drawn over this, so most of them hit a running run.
        code, bench.fault_s, cal, err = bench.clean_run("m-cal")
        if code != 0 or cal != ref:
            print(err, file=sys.stderr)
            return 1
        print(f"clean run: {secs:.1f} s, {len(ref)} claims; a trial's run: {bench.fault_s:.1f} s; "
              f"{a.trials} trials (seed {a.seed})", flush=True)
        prev = "m-ref"
        for i in range(1, a.trials + 1):
            fault = bench.rng.choice(faults)
            rec = bench.trial(i, fault, prev)
            prev = rec["model"]
            rows.append(rec)
            print(table([rec], summary([rec])).splitlines()[1], flush=True)
    finally:
        bench.prefect.stop()
        bench.judge.stop()
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    s = summary(rows)
    print()
    print(table(rows, s))
    result = {"config": {"trials": a.trials, "seed": a.seed, "size": a.size, "chunks": chunks, "answers": n_answers,
                         "claims": len(bench.reference or []), "faults": list(faults),
                         "clean_run_s": round(bench.ref_s, 2), "trial_run_s": round(bench.fault_s, 2), "total_s": round(time.monotonic() - t_start, 1),
                         "workspace": info, "cores": os.cpu_count()},
              "summary": s, "trials": rows}
    write_result(result, a.json or ROOT / "benchmarks" / "results" / f"{a.name or 'chaos'}.json")
    return 0


def write_result(result: dict, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwritten: {out}")


def big_main(a: argparse.Namespace) -> int:
    """The big-workspace scenarios (chaos_big.py): exit status 1 unless every kill passed."""
    from benchmarks import chaos_big

    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="ragspan-chaos-big-"))
    work.mkdir(parents=True, exist_ok=True)
    bench = Bench(work, a.ws.resolve(), a.seed, local_judge=True)
    if a.prefect_api:  # the tests' session server: no start of our own
        bench.api = bench.env["PREFECT_API_URL"] = a.prefect_api
    try:
        if not a.prefect_api:
            bench.prefect.start()
        result = chaos_big.run(bench, a.ws.resolve(), a.kills, a.seed, tuple(a.kinds.split(",")))
    finally:
        bench.prefect.stop()
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    write_result(result, a.json or ROOT / "benchmarks" / "results" / f"{a.name or 'chaos-big'}.json")
    return 0 if result["summary"]["passed"] == result["summary"]["kills"] else 1


if __name__ == "__main__":
    sys.exit(main())
