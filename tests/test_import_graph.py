"""Guarantee: imports only go down the floors drawn in docs/architecture.md, and none circle.

The floor map is read from docs/architecture.md (the block between `<!-- floors -->` and
`<!-- /floors -->`), so the picture a newcomer reads is the rule the suite keeps. Every
import statement in tasks/ and flows/ counts — a lazy one inside a function too — except the
type-only ones under `if TYPE_CHECKING:`, which never run. There is no exception list."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import REPO
from ragspan.tasks.code_identity import imported_names

PARTS = (("ragspan.tasks", REPO / "tasks"), ("ragspan.flows", REPO / "flows"))


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for prefix, root in PARTS:
        for path in root.rglob("*.py"):
            bits = list(path.relative_to(root).with_suffix("").parts)
            if bits[0] == "api_pkg":  # the package `ragspan` itself (pyproject maps it)
                found["ragspan" + "".join(f".{b}" for b in bits[1:] if b != "__init__")] = path
                continue
            if bits[-1] == "__init__":
                bits.pop()
            found[".".join([prefix, *bits])] = path
    return found


MODULES = _modules()
# The two top packages are namespaces (empty __init__): every module runs them, none is a room.
NAMESPACES = ("ragspan.tasks", "ragspan.flows")
for _ns in NAMESPACES:
    assert not imported_names(ast.parse(MODULES[_ns].read_text(encoding="utf-8")), _ns, True), _ns
    del MODULES[_ns]


def _floors() -> list[list[str]]:
    """[[room path, ...] per floor], ground floor first, from docs/architecture.md."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("<!-- floors -->", 1)[1].split("<!-- /floors -->", 1)[0]
    floors: dict[int, list[str]] = {}
    for line in block.splitlines():
        m = re.match(r"\s*floor (\d+)\s+(.*)", line)
        if m:
            floors[int(m.group(1))] = re.findall(r"(?:tasks|flows)/[\w/]*(?:\.py)?", m.group(2).split("  —")[0])
    assert floors and sorted(floors) == list(range(len(floors))), floors
    return [floors[i] for i in range(len(floors))]


FLOORS = _floors()


def _room(name: str) -> str:
    """The room path (as the map names it) a module belongs to."""
    path = MODULES[name].relative_to(REPO).as_posix()
    best = max((room for floor in FLOORS for room in floor
                if path == room or (room.endswith("/") and path.startswith(room))), key=len, default=None)
    assert best is not None, f"{path} is in no room of the floor map in docs/architecture.md"
    return best


def _floor(room: str) -> int:
    return next(i for i, floor in enumerate(FLOORS) if room in floor)


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in MODULES.items():
        names = {n for n in imported_names(ast.parse(path.read_text(encoding="utf-8")), name,
                                           path.name == "__init__.py") if n.startswith("ragspan")}
        for target in names:
            # `from pkg import sub` names pkg and pkg.sub: the submodule is what is imported
            if target in MODULES and MODULES[target].name == "__init__.py" and any(
                    t.startswith(target + ".") and t in MODULES for t in names):
                continue
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                edges[name].add(target)
    return edges


EDGES = _edges()


def test_every_module_is_in_a_room_of_the_map():
    for name in MODULES:
        _room(name)


def test_no_import_climbs_a_floor():
    climbs = [f"{a} (floor {_floor(_room(a))}) imports {b} (floor {_floor(_room(b))})"
              for a, targets in EDGES.items() for b in targets if _floor(_room(b)) > _floor(_room(a))]
    assert not climbs, "\n".join(sorted(climbs))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def test_no_modules_import_each_other_in_a_circle():
    assert _cycles(EDGES) == []


def test_rooms_on_one_floor_import_one_way():
    rooms: dict[str, set[str]] = defaultdict(set)
    for a, targets in EDGES.items():
        for b in targets:
            if _room(a) != _room(b):
                rooms[_room(a)].add(_room(b))
    assert _cycles(rooms) == []


def test_the_state_room_is_the_ground_floor_reached_through_its_face():
    state = "tasks/state/"
    assert _floor(state) <= 1 and FLOORS[0] == ["tasks/errors.py"]
    inside = {n for n in MODULES if _room(n) == state}
    for a, targets in EDGES.items():
        for b in targets:
            if a in inside:  # the room imports nothing of ragspan but the error tree, never its own face
                assert b in inside or b == "ragspan.tasks.errors", (a, b)
                assert b != "ragspan.tasks.state", a
            elif b in inside:
                assert b == "ragspan.tasks.state", f"{a} imports the private {b}: use the room's face"


def test_no_dynamic_import_below_the_top_floor():
    """importlib.import_module(name) hides an edge from this check: only the top floor (the
    CLI's command table, the `ragspan` package's lazy names) may use it."""
    top = len(FLOORS) - 1
    for name, path in MODULES.items():
        if _floor(_room(name)) == top:
            continue
        assert "import_module(" not in path.read_text(encoding="utf-8"), name


@pytest.mark.parametrize("fragment", ["import fcntl", "fcntl.", "damaged_dir()", "state_dir() /"])
def test_locks_healing_and_state_paths_live_in_the_state_room(fragment: str):
    outside = [n for n, p in MODULES.items() if _room(n) != "tasks/state/" and fragment in p.read_text(encoding="utf-8")]
    assert outside == []


def test_the_check_sees_a_climbing_import(tmp_path):
    """The check itself can fail: a lazy import of a flow from the core is an edge upward."""
    tree = ast.parse("def f():\n    from ragspan.flows.evaluate import evaluate\n")
    assert "ragspan.flows.evaluate" in imported_names(tree, "ragspan.tasks.core.text", False)
    guarded = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ragspan.flows import api\n")
    assert not any(n.startswith("ragspan.flows") for n in imported_names(guarded, "ragspan.tasks.core.text", False))
    assert _floor(_room("ragspan.flows.evaluate")) > _floor(_room("ragspan.tasks.core.text"))


def _defined(tree: ast.Module) -> set[str] | None:
    """The names a module's top level defines (None: it has a module `__getattr__`, so any)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == "__getattr__":
                return None
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.If, ast.Try)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    names.update((a.asname or a.name).split(".")[0] for a in sub.names)
                elif isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
                    names.add(sub.name)
                elif isinstance(sub, ast.Assign):
                    names.update(n.id for t in sub.targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def test_every_import_of_ragspan_names_something_that_exists():
    """A moved module leaves `from ragspan.flows import local_server` behind, inside a function
    where no import at start-up finds it: every `from ragspan.X import n` in tasks/, flows/,
    tests/, benchmarks/ and training/ must name a module or a name X defines."""
    all_modules = {**MODULES, **{ns: (REPO / ns.split(".")[1] / "__init__.py") for ns in NAMESPACES}}
    trees = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in all_modules.items()}
    broken = []
    for path in [p for d in ("tasks", "flows", "tests", "benchmarks", "training") for p in (REPO / d).rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith("ragspan"):
                if node.module not in trees:
                    broken.append(f"{path.relative_to(REPO)}: no module {node.module}")
                    continue
                defined = _defined(trees[node.module])
                for alias in node.names:
                    if f"{node.module}.{alias.name}" not in trees and defined is not None and alias.name not in defined:
                        broken.append(f"{path.relative_to(REPO)}: {node.module} has no {alias.name}")
            elif isinstance(node, ast.Import):
                broken += [f"{path.relative_to(REPO)}: no module {a.name}" for a in node.names
                           if a.name.startswith("ragspan.") and a.name not in trees]
    assert broken == []
