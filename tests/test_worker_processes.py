"""Worker processes end with their parent, and mapped pages are handed back
(tasks/state/_workers.py, tasks/state/_mapped.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from ragspan.tasks.state._mapped import mapped_buffer, release_mapped_pages

# The local judge's own pool, started as a big judge_many starts it; its workers' pids printed.
_PARENT = """
import os, time
from ragspan.tasks.judges import local
def _pid(_):
    return os.getpid()
if __name__ == "__main__":
    pool = local._pool_for(local.MIN_POOLED_PAIRS, 2)
    pids = set()
    while len(pids) < 2:  # each worker answers once it has started
        pids |= set(pool.map(_pid, range(8)))
    print(" ".join(map(str, sorted(pids))), flush=True)
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes (its parent, init, reaps it)
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def test_judge_workers_end_when_their_parent_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(_PARENT)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        line = proc.stdout.readline()
        workers = [int(p) for p in line.split()]
        assert len(workers) == 2 and all(_alive(p) for p in workers), line
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 20
    while any(_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in workers if _alive(p)], "judge workers outlived their killed parent"


def _rss_file_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssFile in /proc/self/status")


def test_mapped_pages_are_handed_back_and_still_read(tmp_path: Path) -> None:
    data = np.random.default_rng(7).integers(0, 256, 48 << 20, dtype=np.uint8)
    path = tmp_path / "texts.bin"
    path.write_bytes(data.tobytes())
    buf = mapped_buffer(path)
    view = np.frombuffer(buf, dtype=np.uint8)
    before = _rss_file_mb()
    total = int(view.sum(dtype=np.int64))  # touches every page of the map
    touched = _rss_file_mb()
    assert touched - before > 40, (before, touched)
    release_mapped_pages()
    assert touched - _rss_file_mb() > 40
    assert int(view.sum(dtype=np.int64)) == total == int(data.sum(dtype=np.int64))  # read back from the cache
    (tmp_path / "empty").touch()
    assert mapped_buffer(tmp_path / "empty").size == 0
