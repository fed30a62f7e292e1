"""Worker processes that end with the process that started them.

The local judge and the index build spawn worker processes (ProcessPoolExecutor, spawn
context). When their parent ends normally the pool shuts them down; when it is killed
(SIGKILL, the OOM killer, a CI timeout) nothing does: each worker waits on its call queue,
whose write end it holds itself, so it never sees end-of-file and lives on — measured:
both judge workers of a SIGKILLed `ragspan evaluate` were still alive 30 s later. A
worker started through `spawn_pool` watches its parent instead and exits once it is gone
(its parent pid changes when it is re-parented). Polling, not PR_SET_PDEATHSIG: that
signal follows the parent *thread* that forked, and a pool's workers are started by
whichever Prefect worker thread first submits — a thread that may end long before the
process does.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor

PARENT_POLL_S = 1.0  # how soon an orphaned worker notices


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (another user's counts: it may not be signalled)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def spawn_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of `workers` spawned processes (spawn, not fork: the parent runs Prefect's
    threads, and a forked child could inherit a lock one of them held), each ending itself
    when this process dies."""
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=exit_with_parent, initargs=(os.getpid(),))


def exit_with_parent(parent: int) -> None:
    """Run in each worker as it starts: a daemon thread that ends the worker when `parent`
    is no longer its parent. `os._exit`: the worker's queues may be broken; there is
    nothing of its own to flush (its results go to a parent that is gone)."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="ragspan-parent-watch", daemon=True).start()
