"""Old import paths of modules that moved when the house was restructured (issue #13).

Code and docs written against the old paths keep working for one release: importing an old name
gives the very module object of the new one (so names, private helpers and monkeypatching behave
exactly alike). No file stands at an old path, so git follows each move as a rename and later
merges land in the new file. This table and the finder go after one release.
"""

from __future__ import annotations

import importlib
import sys
from importlib.machinery import ModuleSpec
from typing import Any

# old dotted name -> new dotted name
MOVED: dict[str, str] = {
    "squeez_ray.backends": "squeez_ray.infer.registry",
    "squeez_ray.infer.prompt": "squeez_ray.prompt",
    "squeez_ray.evaluate.baselines": "squeez_ray.infer.baselines",
    "squeez_ray.infer.cli_prune": "squeez_ray.cli.prune",
    "squeez_ray.infer.settings": "squeez_ray.cli.settings",
    "squeez_ray.infer.store": "squeez_ray.cli.store",
    "squeez_ray.evaluate.cli_eval": "squeez_ray.cli.eval",
    "squeez_ray.testing.tiny": "squeez_ray.train.tiny",
}


class _AliasLoader:
    """Hands the import system the already-imported new module instead of making a new one."""

    @staticmethod
    def create_module(spec: ModuleSpec) -> Any:
        return importlib.import_module(MOVED[spec.name])

    @staticmethod
    def exec_module(module: Any) -> None:
        pass  # the new module ran when it was imported


class _AliasFinder:
    """First on ``sys.meta_path``, and it answers only for the old names: no file stands at those
    paths in this tree, and a stale copy elsewhere (an older editable install) must not answer."""

    @staticmethod
    def find_spec(fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if fullname in MOVED:
            return ModuleSpec(fullname, _AliasLoader())
        return None


def install() -> None:
    if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())
