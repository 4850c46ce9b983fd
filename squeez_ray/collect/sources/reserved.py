"""Sources reserved for evaluation (LABELLING.md): never a source of training outputs, at any version.

Collectors and configs check names against this list, and a test checks every shipped data config.
"""

from __future__ import annotations

import re

RESERVED_SOURCES = frozenset({
    "requests", "flask", "xarray", "pytest", "sphinx", "kilo", "itoa", "ky", "click", "attrs", "marshmallow",
    "tabulate", "cachetools", "humanize", "boltons", "toolz", "more-itertools", "markdown", "packaging",
    "itsdangerous", "tomlkit", "pluggy", "rxjs", "eslint-config-airbnb-base",
})
# This machine's package-manager logs and listings are reserved too.
RESERVED_PATHS = ("/var/log/apt/history.log", "/var/log/dpkg.log", "/var/log/alternatives.log")
RESERVED_COMMANDS = ("dpkg -s", "dpkg --status")


def canonical(name: str) -> str:
    """PyPI-style normalised name ('More_Itertools' -> 'more-itertools'), without an ecosystem prefix."""
    name = name.split(":", 1)[-1].split("/")[-1]
    return re.sub(r"[-_.]+", "-", name).lower()


def is_reserved(name: str) -> bool:
    return canonical(name) in RESERVED_SOURCES


def reserved_use(source: str, command: str = "") -> str | None:
    """Why a pool row may not be used for training, or None."""
    if is_reserved(source):
        return f"source {source!r} is reserved for evaluation"
    for path in RESERVED_PATHS:
        if path in command:
            return f"{path} is reserved for evaluation"
    if any(c in command for c in RESERVED_COMMANDS):
        return "dpkg -s listings are reserved for evaluation"
    return None
