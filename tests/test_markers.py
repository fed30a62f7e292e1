"""The test suite in parts: `pytest -m "not e2e"` is the quick part, plain `pytest` (what
scripts/test runs) is everything but the opt-in `live` tests, and `-m live` selects those.
Checked by collecting real test files with pytest itself (nothing runs)."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO

# One file of each kind: live (opt-in), e2e (slow, whole module), quick.
FILES = ["tests/test_live_model.py", "tests/test_demo_script.py", "tests/test_byte_offsets.py"]


def _collected(*args: str) -> set[str]:
    """The test files pytest selects from FILES with these arguments."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                           *args, *FILES], cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}


def test_the_quick_part_leaves_out_e2e_and_live():
    assert _collected("-m", "not e2e") == {"tests/test_byte_offsets.py"}


def test_everything_but_live_by_default():
    assert _collected() == {"tests/test_demo_script.py", "tests/test_byte_offsets.py"}


def test_live_only_when_asked():
    assert _collected("-m", "live") == {"tests/test_live_model.py"}
