"""The repository's rooms keep their rules: `benchmarks/` may import `training/` (the data
readers, the local judge's fitting code) and `training/` never imports `benchmarks/`; and
BENCHMARKS.md, the benchmarks' index, names every runnable benchmark and no path outside
the repository. Read from the source with `ast` and regular expressions: nothing is imported."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO

# The one direction allowed: benchmarks -> training. Its reverse is what the test forbids.
FORBIDDEN = {"training": "benchmarks"}
_IMPORTERS = ("importlib.import_module", "import_module", "__import__")


def _module_name(path: Path, root: Path = REPO) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _absolute(node: ast.ImportFrom, path: Path, root: Path) -> str:
    """The module an ImportFrom names, a relative one resolved against the file's package."""
    if not node.level:
        return node.module or ""
    package = _module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
    return ".".join([*base, *([node.module] if node.module else [])])


def imported_modules(path: Path, root: Path = REPO) -> list[tuple[int, str]]:
    """(line, module) of every import in the file — at the top, inside functions and
    classes, in try/except — except those under `if TYPE_CHECKING:` (type-only). Calls of
    `importlib.import_module` / `__import__` with a literal name count too."""
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:  # the `else:` of a TYPE_CHECKING test runs
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, path, root)
            found.append((node.lineno, module))
            # `from . import x` / `from pkg import sub`: the names may be modules
            found.extend((node.lineno, f"{module}.{alias.name}") for alias in node.names)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) and ast.unparse(node.func) in _IMPORTERS:
            found.append((node.lineno, node.args[0].value))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    return found


def _top(module: str) -> str:
    return module.split(".", 1)[0]


def test_the_import_reader_sees_every_kind_of_import(tmp_path):
    pkg = tmp_path / "training" / "sub"
    pkg.mkdir(parents=True)
    src = pkg / "m.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "import benchmarks.a\n"
        "if TYPE_CHECKING:\n    from benchmarks import typed\n"
        "else:\n    import benchmarks.untyped\n"
        "def f():\n    from benchmarks.b import c\n"
        "class K:\n    def g(self):\n        import importlib\n"
        "        importlib.import_module('benchmarks.d')\n"
        "from .. import sibling\n",
        encoding="utf-8")
    modules = {m for _, m in imported_modules(src, tmp_path)}
    assert {"benchmarks.a", "benchmarks.untyped", "benchmarks.b", "benchmarks.d",
            "training.sibling"} <= modules
    assert "benchmarks.typed" not in modules  # type-only: not counted


def test_training_and_benchmarks_import_one_way():
    climbing = []
    for room, forbidden in FORBIDDEN.items():
        for path in sorted((REPO / room).rglob("*.py")):
            for line, module in imported_modules(path):
                if _top(module) == forbidden:
                    climbing.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    assert not climbing, (
        "training/ must not import benchmarks/ (benchmarks import training: the data readers "
        "are in training/readers/, the fitting code in training/):\n" + "\n".join(climbing))
    # the allowed direction is really used, so the rule above is about something
    used = {module for path in (REPO / "benchmarks").rglob("*.py") for _, module in imported_modules(path)}
    assert any(_top(m) == "training" for m in used)


# ---------------------------------------------------------------- BENCHMARKS.md

# An absolute path: a slash at the start of a word followed by a name and another slash
# (`/work/...`, `/tmp/x`, `/home/u/`), or one of the usual roots on its own.
_ABSOLUTE = re.compile(r"(?<![\w.~:/-])/(?:(?:work|tmp|home|root|Users|mnt|opt|var|srv|data)\b"
                       r"|[A-Za-z_][\w.-]*/)")


def runnable_benchmarks() -> list[str]:
    """Every module under benchmarks/ with a top-level `def main` or an
    `if __name__ == "__main__":` block, as a dotted name."""
    names = []
    for path in sorted((REPO / "benchmarks").rglob("*.py")):
        if ".venv" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        has_main = any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body)
        guarded = any(isinstance(n, ast.If) and "__name__" in ast.unparse(n.test)
                      and "__main__" in ast.unparse(n.test) for n in tree.body)
        if has_main or guarded:
            names.append(_module_name(path))
    return names


def test_the_absolute_path_pattern():
    bad = ["see /work/scalews/100000x10000", "`/tmp/ws`", "(/home/me/x)", "/root/.cache", "at /work"]
    good = ["`benchmarks/results/HISTORY.md`", "SCALEWS/100000x10000", "wall / CPU s",
            "`scale-grid.json` / `.svg`", "../shared/data", "http://127.0.0.1:8000/v1", "1.8 → 0.51 KB"]
    assert all(_ABSOLUTE.search(s) for s in bad), [s for s in bad if not _ABSOLUTE.search(s)]
    assert not any(_ABSOLUTE.search(s) for s in good), [s for s in good if _ABSOLUTE.search(s)]


def test_benchmarks_md_cites_no_path_outside_the_repository():
    text = (REPO / "BENCHMARKS.md").read_text(encoding="utf-8")
    found = [f"line {text.count(chr(10), 0, m.start()) + 1}: {text[m.start():m.start() + 40].split()[0]}"
             for m in _ABSOLUTE.finditer(text)]
    assert not found, ("BENCHMARKS.md cites paths outside the repository (use a placeholder: WS made "
                       "by benchmarks.scale.generate, STATE, WORK): " + "; ".join(found))


def test_benchmarks_md_names_every_runnable_benchmark():
    text = (REPO / "BENCHMARKS.md").read_text(encoding="utf-8")
    modules = runnable_benchmarks()
    assert "benchmarks.scale.run" in modules and "benchmarks.judge_calls" in modules
    missing = [m for m in modules if not re.search(rf"(?<![\w.]){re.escape(m)}(?![\w]|\.\w)", text)]
    assert not missing, f"BENCHMARKS.md does not name these runnable benchmarks: {missing}"
