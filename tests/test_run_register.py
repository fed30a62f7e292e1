"""The register of runs (tasks/state/_step_results.py): the sweep leaves unread the step
results a cleanly ended run wrote, and reads every record of a run that did not end cleanly.

The records here are files in a temporary results directory; a "damaged" one is a record
the sweep would move aside if it read it, so whether it was read is what the test sees."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ragspan.tasks.state import recording_run, sweep
from ragspan.tasks.state._step_results import RUNS, SWEPT

DAMAGED = b'{"result": "half-writ'  # what a killed run leaves: not JSON Prefect can parse


def _moved(root: Path) -> int:
    return sweep(root)


def test_a_record_written_inside_a_clean_run_is_not_read_again(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSPAN_HOME", str(tmp_path / "home"))
    root = tmp_path / "results"
    with recording_run(root):
        (root / "inside").write_bytes(DAMAGED)  # stands for a record the run wrote whole
    time.sleep(0.02)  # past the file system clock's tick
    (root / "after").write_bytes(DAMAGED)  # written after the run ended: another tool's
    assert _moved(root) == 1  # only "after" was read (and moved aside)
    assert (root / "inside").exists() and not (root / "after").exists()
    # kept: the next sweep reads again what is within 5 s of this one's start
    assert [p.suffix for p in (root / RUNS).iterdir()] == [".clean"]


def test_a_run_that_raised_or_was_killed_leaves_its_records_to_the_sweep(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSPAN_HOME", str(tmp_path / "home"))
    root = tmp_path / "results"
    with pytest.raises(RuntimeError), recording_run(root):
        (root / "raised").write_bytes(DAMAGED)
        raise RuntimeError("a step failed")
    # A killed run: another process opens its entry and dies before closing it.
    code = ("import os, sys; from pathlib import Path; from ragspan.tasks.state import recording_run\n"
            f"root = Path({str(root)!r})\n"
            "with recording_run(root):\n"
            "    (root / 'killed').write_bytes(b'{\"res')\n"
            "    os._exit(9)\n")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 9
    # A clean run after both: its own records are vouched for, but not past an open start.
    with recording_run(root):
        (root / "clean-later").write_bytes(DAMAGED)
    assert _moved(root) == 3  # raised, killed and clean-later: an open entry began before each
    assert {p.name for p in root.iterdir()} == {SWEPT, RUNS}
    assert sorted(p.suffix for p in (root / RUNS).iterdir()) == [".clean", ".failed", ".open"]
    # Once a sweep covered them (past its 5 s of slack), the entries are dropped: the failed
    # and the clean one, and the open one, whose process is gone.
    for entry in (root / RUNS).iterdir():
        entry.write_text(" ".join(str(int(t) - 10**10) for t in entry.read_text().split()))
    os.utime(root / SWEPT, (time.time() - 10, time.time() - 10))
    assert _moved(root) == 0 and list((root / RUNS).iterdir()) == []
    # An open entry of a live process is kept: that run may still be writing.
    with recording_run(root):
        entry = next((root / RUNS).glob("*.open"))
        entry.write_text(str(int(entry.read_text()) - 10**10))
        assert _moved(root) == 0 and entry.exists()


def test_a_record_changed_after_its_run_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSPAN_HOME", str(tmp_path / "home"))
    root = tmp_path / "results"
    with recording_run(root):
        (root / "r").write_bytes(b"{}")
    time.sleep(0.02)  # past the file system clock's tick
    (root / "r").write_bytes(DAMAGED)  # its time moves past the run's end
    assert _moved(root) == 1


def test_the_first_unchanged_run_reads_no_record_of_the_cold_run(tmp_path, monkeypatch):
    """What the register is for: after a cold run that ended cleanly, the next sweep opens
    none of its records (each would be read whole: ~550 MB at 100k chunks)."""
    monkeypatch.setenv("RAGSPAN_HOME", str(tmp_path / "home"))
    root = tmp_path / "results"
    sweep(root)  # the cold run's own sweep: nothing there yet
    with recording_run(root):
        for i in range(20):
            (root / f"rec-{i}").write_bytes(DAMAGED)
    assert _moved(root) == 0 and len(list(root.glob("rec-*"))) == 20
