"""StepLedger: runs a step task inside a flow and keeps what the run report needs —
the Prefect state of every task run (Completed / Cached / Failed) and the judge stats —
and tells the active progress reporter (flows/progress.py) about every step: a shard
starts with its FIRST_STEP (whose first argument is the shard's answers) and ends with
its LAST_STEP.

With RAGSPAN_TIMINGS=FILE in the environment, every step task call (and the flow-level
steps run through `timed`) appends one JSON line {step, state, start, seconds} to FILE —
wall time of the Prefect task call, so it includes Prefect's per-task overhead (cache key,
result persistence). benchmarks/scale/run.py reads it."""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter, defaultdict
from typing import Any

from ragspan.flows import progress
from ragspan.tasks.core.judging import JudgeStats
from ragspan.tasks.errors import DiskFull, StepFailed
from ragspan.tasks.state import no_room, step_results_dir

FIRST_STEP, LAST_STEP = "decompose", "chunk-split"


_TIMINGS_LOCK = threading.Lock()


def record_timing(step: str, state: str, start: float, seconds: float) -> None:
    path = os.environ.get("RAGSPAN_TIMINGS")
    if not path:
        return
    line = json.dumps({"step": step, "state": state, "start": start, "seconds": round(seconds, 4)})
    with _TIMINGS_LOCK, open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def timed(step: Any, *args: Any) -> Any:
    """Call a flow-level task (load, build-index, report), recording its wall time."""
    start, t0 = time.time(), time.perf_counter()
    result = step(*args)
    record_timing(getattr(step, "name", getattr(step, "__name__", str(step))), "Completed", start, time.perf_counter() - t0)
    return result


class StepLedger:
    def __init__(self, shard_answers: int | None = None) -> None:
        """`shard_answers`: the shard's answers, for the progress reporter (default: those
        FIRST_STEP is given — fewer when some start at corpus search, Shard.prior)."""
        self.states: dict[str, Counter[str]] = defaultdict(Counter)
        self.stats = JudgeStats()
        self.shard_answers = shard_answers

    def run(self, step: Any, *args: Any) -> Any:
        report = progress.current()
        first = step.name == FIRST_STEP and args and hasattr(args[0], "__len__")
        count = (self.shard_answers if self.shard_answers is not None else len(args[0])) if first else None
        report.step_started(step.name, count)
        start, t0 = time.time(), time.perf_counter()
        state = step(*args, return_state=True)
        if state.name == "Cached" and _had_judge_errors(state.result()):
            # A cached step whose judge calls failed (outage, spent budget) would keep its
            # claims `unjudged` forever: run it again; its good calls come from the judge cache.
            state = step.with_options(refresh_cache=True)(*args, return_state=True)
        record_timing(step.name, state.name, start, time.perf_counter() - t0)
        self.states[step.name][state.name] += 1
        if not state.is_completed():
            raise _failure(step.name, state)
        result = state.result()
        calls = 0
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], JudgeStats):
            result, stats = result
            if state.name != "Cached":  # a cached step made no judge call in this run
                self.stats += stats
                calls = stats.calls
        report.step_done(step.name, state.name, calls)
        if step.name == LAST_STEP:
            report.shard_done()
        return result

    def summary(self) -> dict[str, dict[str, int]]:
        return {name: dict(counts) for name, counts in self.states.items()}


def _failure(name: str, state: Any) -> Exception:
    """What a step that did not complete raises: no room (the judge cache, Prefect's step
    results) is DiskFull naming the file; anything else StepFailed with the state's message."""
    exc = state.result(raise_on_failure=False) if state.is_failed() else None
    if isinstance(exc, DiskFull):
        return exc
    if isinstance(exc, OSError) and no_room(exc):
        where = step_results_dir()
        return DiskFull(exc.filename or where, where, exc, "step results")
    return StepFailed(f"step {name} ended {state.name}: {state.message}")


def _had_judge_errors(result: Any) -> bool:
    return isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], JudgeStats) and result[1].retryable_errors > 0
