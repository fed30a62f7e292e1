"""The code a cached value follows from, found from the code itself: no hand-kept lists.

A cache key must change when any code that shapes its value changes. Lists of paths kept
by hand ("reporting, reporting/manifest.py, ...") drift: the report snapshot's list missed the
flow that assembles its tables. Here a value names the module that computes it (its
*root*), and its code is every ragspan module that root imports, directly or through
others — each `import` statement anywhere in a file counts, a lazy one inside a function
too, a type-only one (under `if TYPE_CHECKING:`) not — with the package `__init__`s Python
runs on the way and the data files (prompts, model files, templates) lying beside each
module. A change to any of them is a new key; a change elsewhere (the CLI's wording, the
HTML page when only the steps are keyed) is not.

A key may also name rooms that compute nothing of its value (`outside`): where values are
kept (the state room), how failures are named, how inputs are read when the value is keyed
by the inputs' content. The walk does not enter them, so editing them keeps the key.

Imports are read from the source (`ast`), not by importing: hashing costs no import of
pandas or Prefect. Standard library only.
"""

from __future__ import annotations

import ast
import hashlib
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path

Parts = tuple[tuple[str, Path], ...]  # (package, its directory) for each part of ragspan


def _where(package: str) -> Path:
    spec = find_spec(package)  # finds it without running it (only the parent `ragspan` runs)
    assert spec is not None and spec.origin is not None, package
    return Path(spec.origin).resolve().parent


# Where each top-level part of ragspan lives (an install maps them from tasks/ and flows/).
INSTALLED: Parts = (("ragspan.tasks", _where("ragspan.tasks")), ("ragspan.flows", _where("ragspan.flows")))


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


def _type_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imported_names(tree: ast.Module, name: str, is_package: bool) -> set[str]:
    """Every module name an import statement of `tree` names (anywhere, a lazy one too; a
    `from X import a` names X and X.a, which is a submodule when it is one), except the
    imports under `if TYPE_CHECKING:`, which never run."""
    package = name if is_package else name.rpartition(".")[0]
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _type_only(node):
            skipped.update(id(n) for body in node.body for n in ast.walk(body))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the package this module sits in
                bits = package.split(".")
                base = ".".join(bits[:len(bits) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return found


def imported_modules(path: Path, name: str, parts: Parts = INSTALLED) -> set[str]:
    """The ragspan modules the file of module `name` imports (anywhere in it, type-only
    imports aside)."""
    found = _names_in(path.read_text(encoding="utf-8"), str(path), name, path.name == "__init__.py")
    return {m for m in found if m.startswith("ragspan.") and module_file(m, parts) is not None}


@lru_cache(maxsize=1024)
def _names_in(source: str, filename: str, name: str, is_package: bool) -> frozenset[str]:
    """`imported_names` of a module's source, parsed once per process for each text (a run
    hashes three roots whose closures share most modules; keyed by the text itself, so an
    edited file is parsed again)."""
    return frozenset(imported_names(ast.parse(source, filename), name, is_package))


def _within(name: str, rooms: tuple[str, ...]) -> bool:
    return any(name == r or name.startswith(r + ".") for r in rooms)


def code_of(roots: tuple[str, ...], parts: Parts = INSTALLED, outside: tuple[str, ...] = ()) -> tuple[Path, ...]:
    """Every file that shapes what the `roots` modules compute: their import closure
    within ragspan, the packages on the way, and the data files beside each module —
    not entering the modules and packages of `outside`."""
    seen: set[str] = set()
    todo = [r for root in roots for r in (*_parents(root), root)]
    while todo:
        name = todo.pop()
        if name in seen or _within(name, outside) or (path := module_file(name, parts)) is None:
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


def code_hash(version: str, roots: tuple[str, ...], parts: Parts = INSTALLED, outside: tuple[str, ...] = ()) -> str:
    """sha256 (12 hex digits) of `version` and every file of `code_of(roots, outside)`, by
    name and bytes. `parts`: where ragspan's code is (another copy of it, in tests)."""
    h = hashlib.sha256(version.encode())
    for f in code_of(roots, parts, outside):
        h.update(_relative(f, parts).encode() + b"\x00")
        h.update(f.read_bytes())
    return h.hexdigest()[:12]
