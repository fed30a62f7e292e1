"""Process setup done before Prefect is imported: where its state lives, how loud it is.

Prefect state (home, persisted task results) and the judge cache live under the
ragspan state dir (`.ragspan/`, or RAGSPAN_HOME) — never inside a DVC out, which DVC
deletes before a stage runs. Values the user already set win.
"""

from __future__ import annotations

import os
from pathlib import Path

from ragspan.tasks.state import state_dir


def configure_prefect() -> None:
    root = state_dir()
    defaults = {
        "PREFECT_HOME": str(root / "prefect"),
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(root / "prefect" / "results"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_LOGGING_LEVEL": "CRITICAL",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
        # Task runs are still cached and persisted; the temporary server just does not
        # record them (removes most SQLite lock contention, docs/stack.md).
        "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED": "false",
        "DVC_NO_ANALYTICS": "1",
    }
    for key, value in defaults.items():
        os.environ.setdefault(key, value)
    # Prefect creates only the last path component of its home; the SQLite database of
    # the temporary server then fails to open and startup times out.
    Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
