"""The house's rules, checked from the code (docs/ARCHITECTURE.md): its floor table is the one the imports give;
production code never imports the test helpers; no module outgrows 400 lines;
imports run one way (no circle of modules, no two rooms that import each other); library modules have
no ``__main__`` block (entry points live in jobs/); backend names are listed in infer/registry.py only."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path


from squeez_ray.infer.registry import BACKENDS

REPO = Path(__file__).resolve().parents[2]
PRODUCTION = [*sorted((REPO / "squeez_ray").rglob("*.py")), *sorted((REPO / "jobs").glob("*.py"))]


def test_python_dash_m_runs_the_command():
    out = subprocess.run([sys.executable, "-m", "squeez_ray.cli", "eval", "--help"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "--ray" in out.stdout


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_production_code_imports_no_test_helper():
    offenders = [str(p.relative_to(REPO)) for p in PRODUCTION
                 if "testing" not in p.parts and any(n.startswith("squeez_ray.testing") for n in _imported_modules(p))]
    assert offenders == []


def test_no_module_is_over_400_lines():
    sizes = {str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in PRODUCTION}
    assert {p: n for p, n in sizes.items() if n > 400} == {}


LIBRARY = [p for p in sorted((REPO / "squeez_ray").rglob("*.py")) if p.name != "__main__.py"]


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """module -> the squeez_ray modules it imports anywhere (top level or inside a function): a lazy
    import is still an arrow of the house, it only runs later."""
    modules = _modules()
    return {name: _house_imports(path, modules) - {name} for name, path in modules.items()}


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((REPO / "squeez_ray").rglob("*.py"))}


def _house_imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The squeez_ray modules one file imports (the package's face, squeez_ray/__init__.py, left out)."""
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            wanted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # `from pkg import sub` imports the submodule when there is one, else names of pkg
            wanted = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                      for a in node.names]
        else:
            continue
        for target in wanted:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != "squeez_ray":
                targets.add(target)
    return targets


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _room(module: str) -> str:
    return ".".join(module.split(".")[:2])  # squeez_ray.infer, squeez_ray.runner, ...


def test_no_modules_import_each_other_in_a_circle():
    graph = _import_graph()
    circles = sorted(f"{a} -> {b}" for a in graph for b in graph[a] if a in _reachable(graph, b))
    assert circles == []


def test_no_two_rooms_import_each_other():
    """A room (a folder under squeez_ray/, or a top-level module) imports only rooms below it: an
    arrow that runs back up makes two rooms one tangle."""
    rooms: dict[str, dict[str, tuple[str, str]]] = {}
    for module, targets in _import_graph().items():
        for target in targets:
            if _room(module) != _room(target):
                rooms.setdefault(_room(module), {}).setdefault(_room(target), (module, target))
    graph = {room: set(targets) for room, targets in rooms.items()}
    back = sorted(f"{a} -> {b} ({' -> '.join(rooms[a][b])})" for a in graph for b in graph[a]
                  if a in _reachable(graph, b))
    assert back == []


def test_the_import_graph_check_sees_a_circle(tmp_path):
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert {m for m in graph if m in _reachable(graph, m)} == {"a", "b", "c"}


def test_library_modules_have_no_main_block():
    """Entry points live in jobs/ (and the squeez command in cli/__main__.py)."""
    def has_main(path: Path) -> bool:
        return any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
                   for node in ast.parse(path.read_text(), str(path)).body)

    assert [str(p.relative_to(REPO)) for p in LIBRARY if has_main(p)] == []


def test_backend_names_are_listed_only_in_the_registry():
    """A tuple, list or set of two or more backend names anywhere but infer/registry.py is a hand-kept
    copy that drifts when a backend is added."""
    offenders = []
    for path in LIBRARY:
        if path.relative_to(REPO).as_posix() == "squeez_ray/infer/registry.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 2 and all(
                    isinstance(e, ast.Constant) and e.value in BACKENDS for e in node.elts):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []


def _room_floors() -> dict[str, int]:
    """Each room's floor as docs/ARCHITECTURE.md draws it: a room is a folder under squeez_ray/ or a
    module at its top (``infer/``, ``prompt.py``), or jobs/ or scripts/; floor 1 imports nothing of the
    house, any other room stands one floor above the highest room it imports."""
    modules = _modules()

    def room(path: Path) -> str:
        parts = path.relative_to(REPO).parts
        if parts[0] != "squeez_ray":
            return f"{parts[0]}/"  # jobs/, scripts/
        return parts[1] if len(parts) == 2 else f"{parts[1]}/"

    files = [p for p in modules.values() if p != REPO / "squeez_ray" / "__init__.py"]
    files += [*sorted((REPO / "jobs").glob("*.py")), *sorted((REPO / "scripts").glob("*.py"))]
    arrows: dict[str, set[str]] = {}
    for path in files:
        arrows.setdefault(room(path), set()).update(room(modules[t]) for t in _house_imports(path, modules))
    floors: dict[str, int] = {}

    def floor(name: str) -> int:  # the rooms form no circle (test_no_two_rooms_import_each_other)
        if name not in floors:
            floors[name] = 1 + max((floor(t) for t in arrows[name] - {name}), default=0)
        return floors[name]

    return {name: floor(name) for name in arrows}


def _documented_floors() -> dict[str, int]:
    """The floor table of docs/ARCHITECTURE.md: rows ``| N | `room` `room` | ... |``."""
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    table = text.split("## Floor plan", 1)[1].split("\n## ", 1)[0]
    floors = {}
    for row in re.findall(r"^\| *(\d+) *\|([^|]*)\|", table, flags=re.M):
        floors.update({name: int(row[0]) for name in re.findall(r"`([^`]+)`", row[1])})
    return floors


def test_architecture_floor_table_matches_the_imports():
    """docs/ARCHITECTURE.md's floor plan is computed here from the imports, so a change that moves a
    room to another floor (or adds one) fails until the map says so; the house keeps to 8 floors."""
    computed = _room_floors()
    assert _documented_floors() == computed
    assert max(computed.values()) <= 8

