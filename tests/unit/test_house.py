"""The house's rules, checked from the code: moved modules keep their old import paths for one
release, production code never imports the test helpers, and no module outgrows 400 lines."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from squeez_ray._moved import MOVED

REPO = Path(__file__).resolve().parents[2]
PRODUCTION = [*sorted((REPO / "squeez_ray").rglob("*.py")), *sorted((REPO / "jobs").glob("*.py"))]


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_an_old_import_path_is_the_new_module(old, new):
    assert importlib.import_module(old) is importlib.import_module(new)
    assert not (REPO / (old.replace(".", "/") + ".py")).exists()  # no file there: git follows the move


def test_from_import_of_an_old_name_works():
    from squeez_ray import backends
    from squeez_ray.infer import registry, settings
    from squeez_ray.infer.prompt import PROMPT_FORMAT

    from squeez_ray.cli import settings as new_settings
    from squeez_ray.prompt import PROMPT_FORMAT as new_format

    assert backends is registry and settings is new_settings and PROMPT_FORMAT == new_format


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
