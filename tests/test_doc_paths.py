"""Every repository path the documentation names in backticks exists: README.md and
docs/*.md (and the other top-level guides) may not point at a file that was moved or
removed. A path counts when it starts with one of the repository's source folders; a
pattern (`*`) must match something, and a placeholder (`<run>`, `NAME`, `{x}`) ends the
part that is checked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO

DOCS = sorted([REPO / "README.md", REPO / "BENCHMARKS.md", REPO / "SECURITY.md", REPO / "training" / "README.md",
               *(REPO / "docs").glob("*.md")])
ROOTS = ("tasks", "flows", "benchmarks", "training", "tests", "scripts", "docs", "data")
_CODE = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(r"^((?:" + "|".join(ROOTS) + r")/[\w./*<>{}@-]*)")
_PLACEHOLDER = re.compile(r"[<{]|\b[A-Z]{3,}\b")
# Made by a command, not committed: named in the docs as where a command puts them.
MADE_AT_RUN_TIME = {
    "benchmarks/.venv-contexttrace",  # benchmarks/baselines/install-contexttrace
}


def named_paths(text: str) -> list[str]:
    """The repository paths in the backtick spans of `text`, up to any placeholder."""
    found = []
    for span in _CODE.findall(text):
        match = _PATH.match(span.strip())
        if not match:
            continue
        path = match.group(1).rstrip(".:,")
        cut = _PLACEHOLDER.search(path)
        if cut:
            path = path[: cut.start()].rsplit("/", 1)[0]
        if path and path.split("/")[0] in ROOTS:
            found.append(path)
    return found


def _exists(path: str) -> bool:
    if path.rstrip("/") in MADE_AT_RUN_TIME:
        return True
    if "*" in path:
        return any(REPO.glob(path.rstrip("/")))
    return (REPO / path).exists()


def test_paths_are_recognised_up_to_placeholders():
    text = "see `tasks/core/locate.py`, `results/<run>/`, `benchmarks/results/scale-*.json`, " \
           "`data/sample/runs/<name>.jsonl`, `python -m benchmarks.x` and `flows/cli/`."
    assert named_paths(text) == ["tasks/core/locate.py", "benchmarks/results/scale-*.json",
                                 "data/sample/runs", "flows/cli/"]


@pytest.mark.parametrize("doc", DOCS, ids=[d.relative_to(REPO).as_posix() for d in DOCS])
def test_every_path_a_document_names_exists(doc: Path):
    missing = sorted({p for p in named_paths(doc.read_text(encoding="utf-8")) if not _exists(p)})
    assert not missing, f"{doc.relative_to(REPO)} names paths that do not exist: {missing}"
