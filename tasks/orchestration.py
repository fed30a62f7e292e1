"""How every pipeline step becomes a Prefect task — one place for the cache settings.

Cross-run reuse needs `INPUTS + TASK_SOURCE` and persisted results (the default policy
includes the run id). TASK_SOURCE sees only the task's own body, so every step also
takes `code` (tasks.config.code_version()) and its judge spec/thresholds as inputs.
Results are persisted under the ragspan state dir (PREFECT_RESULTS_LOCAL_STORAGE_PATH,
set by flows.runtime), never inside a DVC out.
"""

from __future__ import annotations

from typing import Callable, TypeVar

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

F = TypeVar("F", bound=Callable)


def step_task(name: str) -> Callable[[F], F]:
    return task(  # type: ignore[return-value]
        name=name,
        cache_policy=INPUTS + TASK_SOURCE,
        persist_result=True,
        log_prints=False,
    )
