"""Load a ``jobs/*.py`` entry point as a module, so a test calls its ``main(argv)`` in process."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load_job(name: str) -> ModuleType:
    """``jobs/<name>.py`` of this checkout, freshly executed (jobs are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"job_{name}", REPO / "jobs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
