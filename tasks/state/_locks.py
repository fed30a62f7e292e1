"""Locks: the one flock recipe every lock of ragspan uses, and the watch flow's workspace
lock (overlapping scheduled or triggered runs of one workspace wait for each other, not
refused, unlike a second run on the same `--out`). flock is released by the kernel when its
process dies, so a killed run never leaves a stale lock."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Literal

from ._dirs import state_dir

LOCK_WAIT_S = 6 * 3600
LockMode = Literal["exclusive", "shared"]


@contextlib.contextmanager
def file_lock(path: Path, mode: LockMode = "exclusive", wait: bool = True, open_mode: str = "a") -> Iterator[IO | None]:
    """Hold a flock on `path` (made, with its folder, when missing) for the block: yields the
    open file, or None when `wait` is False and another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = (fcntl.LOCK_SH if mode == "shared" else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB)
    with open(path, open_mode, encoding="utf-8") as fh:
        try:
            fcntl.flock(fh.fileno(), flags)
        except BlockingIOError:
            yield None
            return
        try:
            yield fh
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def workspace_lock(root: Path, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """Wait (not refuse) for the workspace: overlapping watch runs queue."""
    path = state_dir() / "locks" / ("watch-" + hashlib.sha256(str(root).encode()).hexdigest()[:16] + ".lock")
    deadline = time.monotonic() + wait_s
    while True:
        with file_lock(path, wait=False, open_mode="a+") as fh:
            if fh is not None:
                yield
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{root}: another ragspan watch run held the workspace for over {wait_s:.0f} s")
        time.sleep(0.5)
