"""Two parts of the scale benchmarks' tooling: the harness reads the local Prefect server's own
CPU (its process tree, named by the state dir's server.json), and the generator makes chunks
of a given length when asked (issue 42 items 3 and 5)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

from benchmarks.scale.generate import write_workspace
from benchmarks.scale.harness import server_cpu

# A parent that burns ~0.3 CPU-s, starts a child that burns as much, and both then sleep.
_BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
_TREE = _BURN + ("import subprocess, sys\n"
                 f"subprocess.Popen([sys.executable, '-c', {(_BURN + 'time.sleep(60)')!r}])\n"
                 "time.sleep(60)\n")


def test_the_servers_cpu_is_its_whole_process_tree(tmp_path: Path):
    assert server_cpu(tmp_path) == 0.0  # no server.json: no server
    proc = subprocess.Popen([sys.executable, "-c", _TREE])
    try:
        (tmp_path / "server").mkdir()
        (tmp_path / "server" / "server.json").write_text(json.dumps({"pid": proc.pid}))
        deadline = time.monotonic() + 30
        while server_cpu(tmp_path) < 0.55 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert 0.55 <= server_cpu(tmp_path) < 5.0  # parent and child, both counted
    finally:
        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        proc.kill()
        proc.wait()
    assert server_cpu(tmp_path) == 0.0  # the recorded process is gone


def _chunk_lengths(ws: Path) -> list[int]:
    rows = [json.loads(line) for line in (ws / "chunks.jsonl").read_text(encoding="utf-8").splitlines()]
    return [r["char_end"] - r["char_start"] for r in rows]


def test_chunks_of_a_given_length(tmp_path: Path):
    default = write_workspace(tmp_path / "default", 400, 20, source="sample", variants=())
    long = write_workspace(tmp_path / "long", 400, 20, source="sample", variants=(), chunk_chars=900)
    assert default["chunk_chars"] is None and long["chunk_chars"] == 900
    lengths = _chunk_lengths(tmp_path / "long")
    assert abs(statistics.mean(lengths) - 900) < 90
    assert statistics.mean(_chunk_lengths(tmp_path / "default")) < 700  # 3-5 sentences
    # a seed writes the same bytes, the new option left out
    again = write_workspace(tmp_path / "again", 400, 20, source="sample", variants=())
    assert again["chunk_chars"] is None
    assert (tmp_path / "again" / "chunks.jsonl").read_bytes() == (tmp_path / "default" / "chunks.jsonl").read_bytes()


def test_the_heap_timeline_takes_each_steps_largest_sample():
    from benchmarks.scale.heap_timeline import by_step

    res = {"start": 100.0, "samples": [(0.5, 300, 0), (2.0, 900, 400), (2.5, 950, 410), (4.0, 700, 0)],
           "steps": [{"step": "build-index", "start": 101.0, "seconds": 2.0},
                     {"step": "extract", "start": 102.4, "seconds": 0.2},
                     {"step": "extract", "start": 103.5, "seconds": 1.0},  # a step's first run is the one shown
                     {"step": "report", "start": 103.9, "seconds": 0.2}]}
    assert by_step(res) == [("build-index", 1.0, 3.0, 950), ("extract", 2.4, 2.6, 950), ("report", 3.9, 4.1, 700)]
