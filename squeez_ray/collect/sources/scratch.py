"""Small throwaway Python projects with real bugs, so sample data has real failing tool runs.

Each project is a git repository with a package of a few modules, tests of which some fail, code
that trips the linter and the type checker, and a module that raises at import. The tools that run
over it (pytest, python, ruff, mypy, pip, git) are real; only the project is made up. Module
templates are combined per project by a seeded RNG, so projects differ but a seed rebuilds them.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

# Each template: module source, test source, the commit message that adds it, and a later edit
# (old, new, message) that gives the history a real diff. {pkg} is the package name.
TEMPLATES: dict[str, dict[str, object]] = {
    "pricing": {
        "module": '''"""Price calculations."""
import os

TAX_RATES = {"standard": 0.2, "reduced": 0.05}


def net_to_gross(net: float, rate: str = "standard") -> float:
    """Gross price from a net price and a tax rate name."""
    return round(net * (1 + TAX_RATES[rate]), 2)


def apply_discount(price: float, percent: float) -> float:
    if percent > 100:
        raise ValueError(f"discount above 100%: {percent}")
    return price - price * percent / 100


def price_label(price: float) -> str:
    return f"price"
''',
        "tests": '''from {pkg}.pricing import apply_discount, net_to_gross


def test_net_to_gross():
    assert net_to_gross(100) == 120.0


def test_zero_rate():
    assert net_to_gross(100, "zero") == 100


def test_discount_rounding():
    assert apply_discount(19.99, 15) == 16.99


def test_discount():
    assert apply_discount(100, 10) == 90
''',
        "message": "Add pricing helpers for gross prices and discounts",
        "edit": ("return round(net * (1 + TAX_RATES[rate]), 2)", "return round(net * (1.0 + TAX_RATES[rate]), 2)",
                 "Use float arithmetic for gross prices"),
    },
    "text": {
        "module": '''"""Text helpers for titles and slugs."""
import re
import sys


def slugify(title: str) -> str:
    words = re.findall(r"[a-z0-9]+", title.lower())
    return "-".join(words)


def truncate(text: str, limit: int) -> str:
    """Cut text to at most limit characters, ending with an ellipsis."""
    if len(text) <= limit:
        return text
    return text[: limit] + "..."


def count_words(text: str) -> int:
    if text == None:
        return 0
    return len(text.split())
''',
        "tests": '''import pytest

from {pkg}.text import count_words, slugify, truncate


def test_slugify():
    assert slugify("Hello, World!") == "hello-world"


def test_truncate_limit():
    assert len(truncate("abcdefghij", 6)) <= 6


@pytest.mark.parametrize("text,expected", [("one two", 2), ("", 0), ("  spaced   out ", 2), (None, 1)])
def test_count_words(text, expected):
    assert count_words(text) == expected
''',
        "message": "Add text helpers: slugify, truncate and word counts",
        "edit": ("    return text[: limit] + \"...\"", "    return text[:limit] + \"...\"", "Tidy slice in truncate"),
    },
    "inventory": {
        "module": '''"""An in-memory stock of items."""
from dataclasses import dataclass, field


class OutOfStock(Exception):
    pass


@dataclass
class Inventory:
    items: dict = field(default_factory=dict)

    def add(self, name: str, count: int = 1) -> None:
        self.items[name] = self.items.get(name, 0) + count

    def remove(self, name: str, count: int = 1) -> None:
        left = self.items[name] - count
        if left < 0:
            raise OutOfStock(name)
        self.items[name] = left

    def total(self) -> int:
        return sum(self.items.values())


def restock_level(inventory: Inventory, name: str) -> int:
    return "low" if inventory.items.get(name, 0) < 3 else "ok"
''',
        "tests": '''import pytest

from {pkg}.inventory import Inventory, OutOfStock


def test_add_and_total():
    stock = Inventory()
    stock.add("bolt", 3)
    stock.add("nut")
    assert stock.total() == 4


def test_remove_missing_item():
    stock = Inventory()
    with pytest.raises(OutOfStock):
        stock.remove("washer")


def test_remove_too_many():
    stock = Inventory()
    stock.add("bolt", 1)
    with pytest.raises(OutOfStock):
        stock.remove("bolt", 2)
''',
        "message": "Add Inventory with add, remove and totals",
        "edit": ("        left = self.items[name] - count", "        left = self.items[name] - int(count)",
                 "Accept counts given as strings in Inventory.remove"),
    },
    "schedule": {
        "module": '''"""Parsing durations and opening hours."""


def parse_duration(text: str) -> int:
    """Minutes in a duration written as H:MM."""
    hours, minutes = text.split(":")
    if len(minutes) != 2:
        raise ValueError(f"minutes must have two digits: {text!r}")
    return int(hours) * 60 + int(minutes)


def is_open(hour: int, opening: tuple = (9, 17)) -> bool:
    start, end = opening
    return start <= hour < end


def next_slot(slots: list, after: int) -> int:
    return min(s for s in slots if s > after)
''',
        "tests": '''import pytest

from {pkg}.schedule import is_open, next_slot, parse_duration


@pytest.mark.parametrize("text,minutes", [("1:30", 90), ("0:05", 5), ("2:5", 125)])
def test_parse_duration(text, minutes):
    assert parse_duration(text) == minutes


def test_is_open_at_closing_time():
    assert is_open(17)


def test_next_slot_after_last():
    assert next_slot([9, 11, 14], 15) is None
''',
        "message": "Add schedule parsing for durations and opening hours",
        "edit": ("    return min(s for s in slots if s > after)", "    return min(s for s in slots if s > after)  # slots sorted",
                 "Document that next_slot expects sorted slots"),
    },
    "geometry": {
        "module": '''"""Plane geometry for polygons."""
import math


def area(points: list) -> float:
    """Shoelace formula; points in order, not closed."""
    total = 0.0
    for (x1, y1), (x2, y2) in zip(points, points[1:] + points[:1]):
        total += x1 * y2 - x2 * y1
    return abs(total) / 2


def centroid(points: list) -> tuple:
    a = area(points)
    cx = sum(x for x, _ in points) / (6 * a)
    cy = sum(y for _, y in points) / (6 * a)
    return cx, cy


def distance(p: tuple, q: tuple) -> int:
    return math.hypot(q[0] - p[0], q[1] - p[1])
''',
        "tests": '''from {pkg}.geometry import area, centroid, distance


def test_square_area():
    assert area([(0, 0), (2, 0), (2, 2), (0, 2)]) == 4


def test_degenerate_centroid():
    assert centroid([(0, 0), (1, 1), (2, 2)]) == (1, 1)


def test_distance():
    assert distance((0, 0), (3, 4)) == 5
''',
        "message": "Add polygon area, centroid and distance",
        "edit": ("    return abs(total) / 2", "    return abs(total) / 2.0", "Return float areas"),
    },
    "settings": {
        "module": '''"""Settings read from the environment at import time."""
import os

DEFAULTS = {"workers": "4", "timeout": "30s"}


def _read(name: str) -> int:
    return int(os.environ.get(name.upper(), DEFAULTS[name]))


WORKERS = _read("workers")
TIMEOUT = _read("timeout")
''',
        "tests": '''def test_settings_import():
    from {pkg} import settings

    assert settings.WORKERS == 4
''',
        "message": "Read worker and timeout settings from the environment",
        "edit": ('DEFAULTS = {"workers": "4", "timeout": "30s"}', 'DEFAULTS = {"workers": "4", "timeout": "30s", "retries": "3"}',
                 "Add a retries default"),
    },
}

PROJECT_NAMES = ("ledger", "atlas", "harbor", "quill", "meadow", "orbit", "cobalt", "willow", "summit", "ember")


def _git(cwd: Path, *args: str) -> None:
    env = {"GIT_AUTHOR_NAME": "Sample Author", "GIT_AUTHOR_EMAIL": "author@example.invalid",
           "GIT_COMMITTER_NAME": "Sample Author", "GIT_COMMITTER_EMAIL": "author@example.invalid",
           "GIT_AUTHOR_DATE": "2024-03-01T12:00:00", "GIT_COMMITTER_DATE": "2024-03-01T12:00:00",
           "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/local/bin:/usr/bin:/bin"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=30)


def make_project(root: Path, name: str, modules: list[str]) -> Path:
    """Write and commit one project under ``root/name``; returns its directory."""
    project = root / name
    pkg = name.replace("-", "_")
    (project / pkg).mkdir(parents=True)
    (project / "tests").mkdir()
    _git(project, "init", "-q", "-b", "main")
    (project / "pyproject.toml").write_text(
        f'[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{name}"\nversion = "0.1.0"\nrequires-python = ">=3.9"\n'
        f'dependencies = ["{name}-core>=2.0"]\n\n[tool.setuptools]\npackages = ["{pkg}"]\n')
    (project / pkg / "__init__.py").write_text(f'"""{name}: sample project."""\n__version__ = "0.1.0"\n')
    (project / "README.md").write_text(f"# {name}\n\nA small project.\n\n## Usage\n\nImport `{pkg}`.\n\n"
                                       "## Development\n\nRun `pytest` from the project root.\n")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", f"Start {name} package")
    for module in modules:
        template = TEMPLATES[module]
        (project / pkg / f"{module}.py").write_text(str(template["module"]))
        (project / "tests" / f"test_{module}.py").write_text(str(template["tests"]).replace("{pkg}", pkg))
        _git(project, "add", "-A")
        _git(project, "commit", "-q", "-m", str(template["message"]))
    for module in modules:
        old, new, message = TEMPLATES[module]["edit"]  # type: ignore[misc]
        path = project / pkg / f"{module}.py"
        path.write_text(path.read_text().replace(old, new))
        _git(project, "commit", "-q", "-am", message)
    return project


def make_projects(root: str | Path, count: int, seed: int = 0, modules_per_project: int = 4) -> list[Path]:
    rng = random.Random(seed)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    projects = []
    for index in range(count):
        name = f"{PROJECT_NAMES[index % len(PROJECT_NAMES)]}{'' if index < len(PROJECT_NAMES) else index}"
        modules = rng.sample(sorted(TEMPLATES), k=min(modules_per_project, len(TEMPLATES)))
        projects.append(make_project(root, name, modules))
    return projects
