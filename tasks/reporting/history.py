"""`results/history.jsonl`: one JSON line per scheduled or triggered run (the watch flow,
flows/watch.py, appends; `ragspan history` reads). Standard library only: `ragspan history`
reads the file without importing Prefect or pandas."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from ragspan.tasks.core.taxonomy import JUDGED_LABELS, SHORT
from ragspan.tasks.state import file_lock

HISTORY = Path("results") / "history.jsonl"


def append_history(root: Path, record: dict) -> Path:
    path = root / HISTORY
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path) as fh:
        assert fh is not None  # a waiting lock always yields its file
        fh.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return path


def read_history(root: Path) -> list[dict]:
    path = root / HISTORY
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a torn last line is skipped
            if line.strip():
                out.append(json.loads(line))
    return out


def history_table(records: list[dict]) -> str:
    """The records as the table `ragspan history` prints: one row each, rates in percent."""
    head = ["name", "trigger", "index", "version", "finished", "claims"] + [SHORT[k] for k in JUDGED_LABELS] + ["experiment"]
    rows = []
    for r in records:
        rates = r.get("rates") or {}
        exp = (r.get("experiment") or {}).get("name") or ("error" if r.get("record_error") else "-")
        rows.append([r.get("name", "?"), r.get("trigger", "?"), r.get("index") or "-", r.get("version") or "-",
                     (r.get("finished") or "")[:19], str(r.get("claims", "")),
                     *[("-" if rates.get(k) is None else f"{100 * rates[k]:.0f}%") for k in JUDGED_LABELS], exp])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*head), *(fmt.format(*row) for row in rows)]) + "\n"


def previous_results_dir(root: Path, index: str, out_dir: Path) -> str | None:
    """The results an index rebuild is told against: `out_dir`'s own (a DVC workspace's run
    is named after the index), else the latest recorded run of the same index."""
    if (out_dir / "manifest.json").is_file():
        return None  # the evaluate flow's default: the results it replaces
    for record in reversed(read_history(root)):
        if record.get("index") == index and (root / str(record.get("results"))).is_dir():
            return str(root / record["results"])
    return None
