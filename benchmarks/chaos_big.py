"""Faults on the way at scale (issue 34 item 6): SIGKILL while the corpus store or the index
is being written, on a big workspace. Run through chaos.py:

    .venv/bin/python -m benchmarks.chaos --ws SCALEWS/100000x10000 --kills 4 --work WORK/chaos-100k
    .venv/bin/python -m benchmarks.chaos --ws SCALEWS/1000000x10000 --kills 4 --work WORK/chaos-1m

WS (here SCALEWS/NxM, made by `python -m benchmarks.scale.generate --chunks N --answers M
--out SCALEWS/NxM`; WORK a scratch directory) is a generate.py workspace with its `docs-changed/` variant. The real CLI, the default
local judge, a real Prefect server (chaos.py's `Bench`). First the clean sequence in a fresh
state dir: a cold run of WS (the reference results `ref-base`, and the preparation window:
seconds from the process start to the start of its first preparation step and to the end of
its last — load, corpus_identity, build-index: growth.py's PREPARATION_STEPS — from
RAGSPAN_TIMINGS; a kill is drawn uniformly in it), then
the incremental run of WS/docs-changed (`ref-docs`, and the update's preparation window).
Then the kills, the kinds in turn (`--kinds`), each round in a fresh state dir:

| kill | what is killed | then |
|---|---|---|
| preparation | the cold run of WS, at a random moment of its preparation window | a run of WS: completes, identical to ref-base |
| update | the run of WS/docs-changed after a complete run of WS, at a random moment of the update's window | a run of WS (the previous snapshot): completes, identical to ref-base, its index reused (build-index ≤ a quarter of the cold run's; the old index's and corpus store's files untouched); then a run of WS/docs-changed: completes, identical to ref-docs |
| store | the cold run of WS, at a random moment before its flow's first step: the command reading and checking the inputs and writing the corpus store and the validated-inputs cache | a run of WS: completes, identical to ref-base |

"Identical": scenarios.py's check (every table equal with pandas `equals`, metrics.json
equal). Every run after a kill must exit 0 with no traceback in its stderr. Writes
benchmarks/results/NAME.json (default chaos-big).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.scale.growth import PREPARATION_STEPS
from benchmarks.scale.scenarios import same_results

KINDS = ("preparation", "update", "store")
REUSED_INDEX_SHARE = 0.25  # an index reused, not rebuilt: build-index well under the cold run's


@dataclass
class Finished:
    """One run to its end: exit code, seconds, stderr, the flow's step timings."""
    code: int | None
    seconds: float
    stderr: str
    timings: list[dict]
    started: float

    def step_s(self, step: str) -> float:
        return round(sum(r["seconds"] for r in self.timings if r["step"] == step), 3)

    def preparation_span_s(self) -> tuple[float, float]:
        """Seconds from the process start to the start of its first preparation step and to
        the end of its last one: where the corpus store and the index are read and written."""
        prep = [r for r in self.timings if r["step"] in PREPARATION_STEPS]
        if not prep:
            return 0.0, self.seconds
        return (round(min(r["start"] for r in prep) - self.started, 2),
                round(max(r["start"] + r["seconds"] for r in prep) - self.started, 2))


class BigChaos:
    def __init__(self, bench, ws: Path, rng: random.Random) -> None:
        self.bench, self.ws, self.rng = bench, ws, rng
        self.work: Path = bench.work
        self.ref_base = self.work / "ref-base"
        self.ref_docs = self.work / "ref-docs"
        self.windows: dict[str, tuple[float, float]] = {}
        self.cold_build_s = 0.0

    # -- runs -------------------------------------------------------------------------------

    def _use_state(self, state: Path) -> None:
        self.bench.state = state
        self.bench.env["RAGSPAN_HOME"] = str(state)

    def _timings(self, out: Path) -> Path:
        path = out.with_name(out.name + "-timings.jsonl")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        return path

    def finish(self, data: Path, out: Path) -> Finished:
        """A run of `data` to `out` in the current state dir, to its end."""
        timings = self._timings(out)
        started = time.time()
        t0 = time.monotonic()
        proc, err = self.bench.start_run("m-big", data=data, out=out, timings=timings)
        code, t1 = self.bench.wait(proc)
        recs = [json.loads(line) for line in timings.read_text().splitlines()] if timings.exists() else []
        return Finished(code, round(t1 - t0, 2), err.read_text(errors="replace"), recs, started)

    def kill_during(self, data: Path, out: Path, window_s: tuple[float, float]) -> dict:
        """Start a run of `data`; SIGKILL its `ragspan evaluate` at a random moment of the
        window (seconds from its start); what that met."""
        moment = self.rng.uniform(*window_s)
        t0 = time.monotonic()
        proc, err = self.bench.start_run("m-big", data=data, out=out, timings=self._timings(out))
        while proc.poll() is None and time.monotonic() - t0 < moment:
            time.sleep(0.02)
        hit = proc.poll() is None
        if hit:
            os.kill(proc.pid, signal.SIGKILL)
        code, _ = self.bench.wait(proc)
        return {"moment_s": round(moment, 2), "window_s": window_s, "hit_running_run": hit, "exit_code": code,
                "alive_after_30s": self.bench.left_alive(proc.pid),
                "killed_traceback": "Traceback" in err.read_text(errors="replace")}

    def judged(self, prefix: str, run: Finished, out: Path, ref: Path) -> dict:
        """What a run after a kill must show: exit 0, no traceback, results as the reference's."""
        differ = same_results(out, ref) if run.code == 0 else ["not run"]
        rec = {f"{prefix}_exit_code": run.code, f"{prefix}_s": run.seconds,
               f"{prefix}_traceback": "Traceback" in run.stderr, f"{prefix}_differs": differ}
        if run.code != 0 or differ:
            rec[f"{prefix}_stderr"] = run.stderr.strip().splitlines()[-3:]
        return rec

    # -- the clean sequence and the kills --------------------------------------------------

    def reference(self) -> dict:
        """The clean sequence: a cold run of WS, then the 5 %-documents run; the windows."""
        self._fresh_state("state-ref")
        cold = self.finish(self.ws, self.ref_base)
        docs = self.finish(self.ws / "docs-changed", self.ref_docs)
        for name, run in (("cold", cold), ("docs-changed", docs)):
            if run.code != 0:
                raise RuntimeError(f"the clean {name} run failed:\n{run.stderr[-3000:]}")
        self.windows = {"preparation": cold.preparation_span_s(), "update": docs.preparation_span_s(),
                        "store": (0.0, cold.preparation_span_s()[0])}
        self.cold_build_s = cold.step_s("build-index")
        shutil.rmtree(self.work / "state-ref", ignore_errors=True)
        return {"cold_s": cold.seconds, "docs_changed_s": docs.seconds, "windows_s": self.windows,
                "cold_build_index_s": self.cold_build_s, "docs_changed_build_index_s": docs.step_s("build-index")}

    def _fresh_state(self, name: str) -> Path:
        state = self.work / name
        shutil.rmtree(state, ignore_errors=True)
        self._use_state(state)
        return state

    def kill_preparation(self, i: int) -> dict:
        """A cold run of WS killed in its preparation; then WS again, whole."""
        self._fresh_state(f"state-{i}")
        out = self.work / "results" / f"{i}-base"
        rec = {"trial": i, "kill": "preparation", **self.kill_during(self.ws, out, self.windows["preparation"])}
        return {**rec, **self.judged("next", self.finish(self.ws, out), out, self.ref_base)}

    def kill_store(self, i: int) -> dict:
        """A cold run of WS killed while the command reads the inputs and writes the corpus
        store (before its flow starts); then WS again, whole."""
        self._fresh_state(f"state-{i}-store")
        out = self.work / "results" / f"{i}-store"
        rec = {"trial": i, "kill": "store", **self.kill_during(self.ws, out, self.windows["store"])}
        rec.update(self.judged("next", self.finish(self.ws, out), out, self.ref_base))
        shutil.rmtree(self.work / f"state-{i}-store", ignore_errors=True)
        return rec

    def kill_update(self, i: int) -> dict:
        """After a whole run of WS (the state dir of the preparation kill before, or a fresh
        one), the docs-changed run killed in its update; then the old corpus (index reused),
        then the new one."""
        base = self.work / "results" / f"{i}-base"
        if not (base / "metrics.json").exists():
            self._fresh_state(f"state-{i}")
            self.finish(self.ws, base)
        index_before = index_files(self.bench.state)
        docs = self.work / "results" / f"{i}-docs"
        rec = {"trial": i, "kill": "update", **self.kill_during(self.ws / "docs-changed", docs, self.windows["update"])}
        old = self.finish(self.ws, base)
        kept = index_files(self.bench.state)
        rec.update(self.judged("old_corpus", old, base, self.ref_base))
        rec["old_corpus_build_index_s"] = old.step_s("build-index")
        rec["old_index_reused"] = (old.code == 0 and any(r["step"] == "build-index" for r in old.timings)
                                   and old.step_s("build-index") <= REUSED_INDEX_SHARE * max(self.cold_build_s, 0.01))
        rec["old_index_files_untouched"] = all(kept.get(p) == v for p, v in index_before.items())
        rec.update(self.judged("next", self.finish(self.ws / "docs-changed", docs), docs, self.ref_docs))
        return rec

    def trials(self, kills: int, kinds: tuple[str, ...] = KINDS) -> list[dict]:
        """`kills` kills, the kinds in turn; a round's preparation and update kills share
        their state dir."""
        rows = []
        kill = {"preparation": self.kill_preparation, "update": self.kill_update, "store": self.kill_store}
        for k in range(kills):
            i = k // len(kinds) + 1
            rec = kill[kinds[k % len(kinds)]](i)
            rows.append(rec)
            print(line(rec), flush=True)
            if k % len(kinds) == len(kinds) - 1 or k == kills - 1:
                shutil.rmtree(self.work / f"state-{i}", ignore_errors=True)  # big: one state dir at a time
        return rows


SNAPSHOT_STORES = ("index", "corpus")  # the state dir's index and (where the product has one) corpus store


def index_files(state: Path) -> dict[str, tuple[int, int]]:
    """{file of the state dir's index and corpus stores: (size, mtime ns)}: what rewriting the
    previous snapshot would change."""
    return {p.relative_to(state).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for store in SNAPSHOT_STORES if (state / store).is_dir()
            for p in (state / store).rglob("*") if p.is_file()}


def passed(r: dict) -> bool:
    """Nothing lost: every run after the kill whole, identical, traceback-free; the old index reused."""
    ok = all(r[f"{p}_exit_code"] == 0 and not r[f"{p}_traceback"] and not r[f"{p}_differs"]
             for p in ("next", "old_corpus") if f"{p}_exit_code" in r)
    return ok and not r["killed_traceback"] and r.get("old_index_reused", True)


def line(r: dict) -> str:
    extra = (f" old corpus {r['old_corpus_s']} s (build-index {r['old_corpus_build_index_s']} s, "
             f"reused {r['old_index_reused']}, files untouched {r['old_index_files_untouched']})"
             if r["kill"] == "update" else "")
    return (f"{r['trial']:>3} {r['kill']:<11} at {r['moment_s']:>6.1f} s of {r['window_s']} "
            f"hit {r['hit_running_run']!s:<5} next {r['next_s']} s differs {r['next_differs'] or '-'}"
            f"{extra} · {'ok' if passed(r) else 'FAILED'}")


def summary(rows: list[dict]) -> dict:
    return {"kills": len(rows), "per_kind": {k: sum(r["kill"] == k for r in rows) for k in KINDS},
            "hit_running_run": sum(r["hit_running_run"] for r in rows),
            "passed": sum(passed(r) for r in rows),
            "tracebacks": sum(r["killed_traceback"] or r["next_traceback"] or r.get("old_corpus_traceback", False)
                              for r in rows),
            "identical_next": sum(not r["next_differs"] for r in rows),
            "old_index_reused": sum(r.get("old_index_reused", False) for r in rows),
            "alive_after_30s": sum(r["alive_after_30s"] for r in rows),
            "next_s_median": statistics.median(r["next_s"] for r in rows) if rows else None}


def run(bench, ws: Path, kills: int, seed: int, kinds: tuple[str, ...] = KINDS) -> dict:
    """The big-workspace scenarios with `bench`'s Prefect server started: results for the JSON."""
    chaos = BigChaos(bench, ws, random.Random(seed))
    t0 = time.monotonic()
    ref = chaos.reference()
    print(f"clean: cold {ref['cold_s']} s, docs-changed {ref['docs_changed_s']} s; preparation windows "
          f"{ref['windows_s']}; {kills} kills (seed {seed})", flush=True)
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise SystemExit(f"unknown kinds of kill: {', '.join(sorted(unknown))} (known: {', '.join(KINDS)})")
    rows = chaos.trials(kills, kinds)
    s = summary(rows)
    print(f"\nkills {s['kills']} ({s['per_kind']}), met a running run {s['hit_running_run']}, passed "
          f"{s['passed']}/{s['kills']}, next run identical {s['identical_next']}, tracebacks {s['tracebacks']}, "
          f"old index reused {s['old_index_reused']}/{s['per_kind']['update']}, alive after 30 s "
          f"{s['alive_after_30s']}")
    info = json.loads((ws / "info.json").read_text()) if (ws / "info.json").exists() else {}
    return {"config": {"workspace": str(ws), "chunks": info.get("chunks"), "kills": kills, "seed": seed,
                       "cores": os.cpu_count(), "total_s": round(time.monotonic() - t0, 1), "reference": ref},
            "summary": s, "trials": rows}
