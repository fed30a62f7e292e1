"""Process setup done before Prefect is imported: where its state lives, how loud it is.

Prefect state (home, persisted task results) and the judge cache live under the
ragspan state dir (`.ragspan/`, or RAGSPAN_HOME) — never inside a DVC out, which DVC
deletes before a stage runs. Values the user already set win.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Self

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


def api_answers(api_url: str, timeout: float = 2.0) -> bool:
    """Anything answers GET {api}/health (an HTTP error counts: Prefect Cloud wants a key)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(api_url.rstrip("/") + "/health", timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


# Prefect's loggers that report a lost API connection before ApiWatch's health checks do
# (the events client's websocket, the event worker's service failure).
_EARLY_WARNERS = ("prefect.events.clients", "prefect._internal.concurrency")


class ApiWatch:
    """Notice a Prefect API that dies during a run, and keep Prefect from waiting on it.

    Why: when the server is killed mid-run, every later API call retries with exponential
    backoff (PREFECT_CLIENT_MAX_RETRIES: ~60 s per call), and at interpreter exit Prefect
    drains its events and API-log queues against the dead API (~7 s per queued event,
    hundreds of them, a traceback each): the process never ends and a CI job hangs.
    So a daemon thread checks GET /health every `interval` s; after `misses` failures in
    a row it sets the client retries to 0 in the settings the run uses (later calls fail
    at once) and, when `quiet`, silences Prefect's and ragspan's loggers (the command says
    what happened in one line). When the run ends, `drop_backlog` discards what the
    workers still hold.

    A server that accepts connections and never answers (stopped, hung) is worse: every
    call already sent waits out its whole request timeout, one after another (measured:
    143 s after the results were written). So once the API is dead and `finished()` says
    the results are written, the run is given `grace` seconds to end; past that, the
    watch says so (`on_abandon`), flushes the output and ends the process with exit 0 —
    the results are complete; only Prefect's record of the run is not."""

    def __init__(self, api_url: str, quiet: bool = True, interval: float = 2.0, misses: int = 2,
                 finished: Callable[[], bool] | None = None, grace: float = 10.0,
                 on_abandon: Callable[[], None] | None = None) -> None:
        self.url, self.quiet, self.interval, self.misses = api_url, quiet, interval, misses
        self.finished, self.grace, self.on_abandon = finished, grace, on_abandon
        self.dead = False
        self._stop = None
        self._settings: list = []

    def __enter__(self) -> Self:
        import threading

        import prefect.context
        from prefect.settings import get_current_settings

        # The settings of this thread's context (the flow runs here) and the global ones
        # (Prefect's worker threads), changed in place from the watch thread.
        self._settings = [get_current_settings(), prefect.context.GLOBAL_SETTINGS_CONTEXT.settings]
        if self.quiet:
            import logging

            # Prefect's events client can warn of the lost connection before the watch's
            # next check: such a warning checks the API at once, and is dropped if it died.
            for name in _EARLY_WARNERS:
                logging.getLogger(name).addFilter(self._early_warning)
        self._stop = threading.Event()
        threading.Thread(target=self._watch, name="ragspan-api-watch", daemon=True).start()
        return self

    def _early_warning(self, record: object) -> bool:
        """A logging filter: False (dropped) for a warning of these loggers once the API
        is found dead — now, if the watch has not yet seen it."""
        import logging

        if getattr(record, "levelno", 0) < logging.WARNING:
            return True
        if not self.dead and not api_answers(self.url, timeout=1.0):
            self._mark_dead()
        return not self.dead

    def __exit__(self, *exc) -> None:
        if self.quiet:
            import logging

            for name in _EARLY_WARNERS:
                logging.getLogger(name).removeFilter(self._early_warning)
        self._stop.set()
        # A server that died in the last seconds of the run, not yet noticed by the watch,
        # would still leave its events to be drained at exit.
        if not self.dead and not api_answers(self.url):
            self._mark_dead()
        if self.dead:
            self.drop_backlog()

    def _watch(self) -> None:
        missed = 0
        while not self._stop.wait(self.interval):
            if not self.dead:
                missed = 0 if api_answers(self.url) else missed + 1
                if missed >= self.misses:
                    self._mark_dead()
                continue
            if self.finished is None:
                return
            if self.finished():
                if self._stop.wait(self.grace):
                    return  # the run ended on its own
                self._abandon()

    def _abandon(self) -> None:
        """End a run whose results are written but which waits on a dead API."""
        import sys

        if self.on_abandon is not None:
            self.on_abandon()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    def _mark_dead(self) -> None:
        self.dead = True
        for settings in self._settings:
            settings.client.max_retries = 0
            if self.quiet:  # Prefect's concurrency loggers ignore logger levels, not this
                settings.internal.logging_level = "CRITICAL"
        if self.quiet:
            import logging

            for name in [*logging.root.manager.loggerDict, "prefect", "ragspan"]:
                if name.split(".")[0] in ("prefect", "ragspan"):
                    logging.getLogger(name).setLevel(logging.CRITICAL + 1)

    @staticmethod
    def drop_backlog(timeout: float = 15.0) -> None:
        """Discard the events and logs Prefect's workers still hold, stop the workers, and
        wait at most `timeout` s for the item each is sending now. Past that, the process
        would hang at exit, waiting on them: flush the output and end it."""
        import sys

        _, pending = discard_prefect_queues(timeout)
        if pending:
            print("error: Prefect's event workers did not stop; exiting now", file=sys.stderr, flush=True)
            sys.stdout.flush()
            os._exit(1)  # a last resort: the results are written and the output flushed


def discard_prefect_queues(timeout: float) -> tuple[int, int]:
    """(items discarded, services still running after `timeout` s): empty the queues of
    Prefect's queue services (the events worker, the API log worker) and stop them.

    Prefect offers no public way to drop what these workers hold: this is the one place
    that reaches its private `_QueueServiceBase` (`_instances`, `_instance_cache_lock`,
    each service's `_queue`, `drain_all`). tests/test_prefect_private.py fails loudly on a
    Prefect that changes any of them."""
    import queue

    from prefect._internal.concurrency.services import _QueueServiceBase

    with _QueueServiceBase._instance_cache_lock:
        services = list(_QueueServiceBase._instances.values())
    discarded = 0
    for service in services:
        try:
            while True:
                service._queue.get_nowait()
                service._queue.task_done()
                discarded += 1
        except queue.Empty:
            pass
    _, pending = _QueueServiceBase.drain_all(timeout=timeout, at_exit=False)
    return discarded, len(pending)
