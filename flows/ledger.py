"""StepLedger: runs a step task inside a flow and keeps what the run report needs —
the Prefect state of every task run (Completed / Cached / Failed) and the judge stats."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from ragspan.tasks.judges.base import JudgeStats


class StepFailed(RuntimeError):
    pass


class StepLedger:
    def __init__(self) -> None:
        self.states: dict[str, Counter[str]] = defaultdict(Counter)
        self.stats = JudgeStats()

    def run(self, step: Any, *args: Any) -> Any:
        state = step(*args, return_state=True)
        self.states[step.name][state.name] += 1
        if not state.is_completed():
            raise StepFailed(f"step {step.name} ended {state.name}: {state.message}")
        result = state.result()
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], JudgeStats):
            table, stats = result
            if state.name != "Cached":  # a cached step made no judge call in this run
                self.stats += stats
            return table
        return result

    def summary(self) -> dict[str, dict[str, int]]:
        return {name: dict(counts) for name, counts in self.states.items()}
