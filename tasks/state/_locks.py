"""The watch flow's workspace lock: overlapping scheduled or triggered runs of one
workspace wait for each other (not refused, unlike a second run on the same `--out`)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

from ._dirs import state_dir

LOCK_WAIT_S = 6 * 3600


@contextlib.contextmanager
def workspace_lock(root: Path, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Wait (not refuse) for the workspace: overlapping watch runs queue."""
    locks = state_dir() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    path = locks / ("watch-" + hashlib.sha256(str(root).encode()).hexdigest()[:16] + ".lock")
    with open(path, "a+", encoding="utf-8") as fh:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{root}: another ragspan watch run held the workspace "
                                       f"for over {wait_s:.0f} s") from None
                time.sleep(0.5)
        yield
