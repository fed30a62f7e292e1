"""The code a cached value follows from, found from the code itself: no hand-kept lists.

A cache key must change when any code that shapes its value changes. Lists of paths kept
by hand ("reporting, reporting/manifest.py, ...") drift: the report snapshot's list missed the
flow that assembles its tables. Here a value names the module that computes it (its
*root*), and its code is every ragspan module that root imports, directly or through
others — each `import` statement anywhere in a file counts, a lazy one inside a function
too — with the package `__init__`s Python runs on the way and the data files (prompts,
model files, templates) lying beside each module. A change to any of them is a new key;
a change elsewhere (the CLI's wording, the HTML page when only the steps are keyed) is not.

Imports are read from the source text, not by importing: hashing costs no import of
pandas or Prefect. Standard library only.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import ragspan.flows
import ragspan.tasks

Parts = tuple[tuple[str, Path], ...]  # (package, its directory) for each part of ragspan
# Where each top-level part of ragspan lives (an install maps them from tasks/ and flows/).
INSTALLED: Parts = (("ragspan.tasks", Path(ragspan.tasks.__file__).resolve().parent),
                    ("ragspan.flows", Path(ragspan.flows.__file__).resolve().parent))


def module_file(name: str, parts: Parts = INSTALLED) -> Path | None:
    """The source file of module `name` (a package: its __init__.py), or None when it is
    not ragspan's own code (or not there)."""
    for prefix, root in parts:
        if name != prefix and not name.startswith(prefix + "."):
            continue
        rest = name[len(prefix) + 1:].split(".") if name != prefix else []
        base = root.joinpath(*rest)
        for candidate in ((base.with_suffix(".py"),) if rest else ()) + (base / "__init__.py",):
            if candidate.is_file():
                return candidate
    return None


def _parents(name: str) -> list[str]:
    """The packages Python imports before `name`, within ragspan's parts."""
    bits = name.split(".")
    return [".".join(bits[:i]) for i in range(2, len(bits))]


# An import statement at the start of a line: `from X import a, b` (a parenthesised list
# may span lines) or `import X, Y`. A docstring line that looks like one can only add a file.
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]*)"
                     r"|import[ \t]+([^\n#]*))", re.MULTILINE)


def _names(listed: str) -> list[str]:
    """`a, b as c, (d,\n e)` → [a, b, d, e]."""
    return [n.split()[0] for n in listed.strip("()\\ \t\n").replace("\n", " ").split(",") if n.split()]


def imported_modules(path: Path, name: str, parts: Parts = INSTALLED) -> set[str]:
    """The ragspan modules the file of module `name` imports (anywhere in it)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for m in _IMPORT.finditer(path.read_text(encoding="utf-8")):
        source, listed, plain = m.groups()
        if plain is not None:
            found.update(_names(plain))
            continue
        level = len(source) - len(source.lstrip("."))
        if level:  # relative: from the package this module sits in
            parts = package.split(".")
            base = ".".join(parts[:len(parts) - level + 1])
            base = f"{base}.{source[level:]}" if source[level:] else base
        else:
            base = source
        found.add(base)
        found.update(f"{base}.{n}" for n in _names(listed))  # a submodule, when it is one
    return {m for m in found if m.startswith("ragspan.") and module_file(m, parts) is not None}


def code_of(roots: tuple[str, ...], parts: Parts = INSTALLED) -> tuple[Path, ...]:
    """Every file that shapes what the `roots` modules compute: their import closure
    within ragspan, the packages on the way, and the data files beside each module."""
    seen: set[str] = set()
    todo = [r for root in roots for r in (*_parents(root), root)]
    while todo:
        name = todo.pop()
        if name in seen or (path := module_file(name, parts)) is None:
            continue
        seen.add(name)
        todo.extend(m for mod in imported_modules(path, name, parts) for m in (*_parents(mod), mod))
    files: set[Path] = set()
    for name in seen:
        path = module_file(name, parts)
        assert path is not None
        files.add(path)
        files.update(p for p in path.parent.iterdir() if p.is_file() and p.suffix not in (".py", ".pyc"))
    return tuple(sorted(files))


def _relative(path: Path, parts: Parts) -> str:
    for prefix, root in parts:
        if path.is_relative_to(root):
            return f"{prefix}/{path.relative_to(root).as_posix()}"
    return path.name


def code_hash(version: str, roots: tuple[str, ...], parts: Parts = INSTALLED) -> str:
    """sha256 (12 hex digits) of `version` and every file of `code_of(roots)`, by name and
    bytes. `parts`: where ragspan's code is (another copy of it, in tests)."""
    h = hashlib.sha256(version.encode())
    for f in code_of(roots, parts):
        h.update(_relative(f, parts).encode() + b"\x00")
        h.update(f.read_bytes())
    return h.hexdigest()[:12]
