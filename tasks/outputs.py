"""Atomic writes: a results directory appears whole or not at all.

Everything is written into a fresh sibling temp directory, fsynced, then swapped in
with renames; a crash leaves either the previous results or the new ones, plus at
most a `.tmp-*` directory that the next run removes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable


def write_atomic_dir(out_dir: Path, writers: dict[str, Callable[[Path], None]]) -> Path:
    """Call each writer with a path inside a temp dir, then swap the dir into place."""
    out_dir = out_dir.resolve()
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.parent.glob(f".{out_dir.name}.tmp-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        for name, write in writers.items():
            write(tmp / name)
            with open(tmp / name, "rb") as fh:
                os.fsync(fh.fileno())
        old = out_dir.parent / f".{out_dir.name}.tmp-old"
        if out_dir.exists():
            os.replace(out_dir, old)
        os.replace(tmp, out_dir)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
