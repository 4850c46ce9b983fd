"""Old import paths of modules that moved when the house was restructured (issues #13, #27).

Code and docs written against the old paths keep working for one release: importing an old name
gives the very module object of the new one (so names, private helpers and monkeypatching behave
exactly alike). No file stands at an old path, so git follows each move as a rename and later
merges land in the new file. This table and the finder go after one release.
"""

from __future__ import annotations

import importlib
import sys
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
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
    # issue #27: encoder/ and handlabel/ dissolved into the stages' rooms
    "squeez_ray.encoder.windows": "squeez_ray.infer.encoder_windows",
    "squeez_ray.encoder.tokens": "squeez_ray.infer.encoder_tokens",
    "squeez_ray.encoder.model": "squeez_ray.infer.encoder_model",
    "squeez_ray.encoder.scoring_pruner": "squeez_ray.infer.encoder_scoring_pruner",
    "squeez_ray.encoder.scoring": "squeez_ray.infer.encoder_scoring",
    "squeez_ray.encoder.onnx_runtime": "squeez_ray.infer.encoder_onnx",
    "squeez_ray.encoder.pruner": "squeez_ray.infer.encoder_pruner",
    "squeez_ray.encoder.train": "squeez_ray.train.encoder_run",
    "squeez_ray.encoder.data": "squeez_ray.train.encoder_data",
    "squeez_ray.encoder.loss": "squeez_ray.train.encoder_loss",
    "squeez_ray.encoder.onnx_export": "squeez_ray.train.encoder_export",
    "squeez_ray.encoder.ship": "squeez_ray.train.encoder_ship",
    "squeez_ray.encoder.corpus": "squeez_ray.dataset.encoder_corpus",
    "squeez_ray.handlabel.batches": "squeez_ray.label.hand_batches",
    "squeez_ray.handlabel.render": "squeez_ray.label.hand_render",
    "squeez_ray.handlabel.labels": "squeez_ray.label.hand_labels",
    "squeez_ray.handlabel.agreement": "squeez_ray.label.hand_agreement",
    "squeez_ray.handlabel.merge": "squeez_ray.dataset.hand_merge",
    "squeez_ray.handlabel.datasheet": "squeez_ray.dataset.datasheet",
    "squeez_ray.handlabel.pool": "squeez_ray.collect.pool",
    "squeez_ray.handlabel.reserved": "squeez_ray.collect.sources.reserved",
    "squeez_ray.handlabel.python_pool": "squeez_ray.collect.sources.python_pool",
    "squeez_ray.handlabel.ecosystems": "squeez_ray.collect.sources.ecosystems",
    "squeez_ray.handlabel.recipe_tree": "squeez_ray.collect.sources.recipe_tree",
    "squeez_ray.handlabel.service_logs": "squeez_ray.collect.sources.service_logs",
    "squeez_ray.dataset.sources": "squeez_ray.collect.sources.source_tree",
    "squeez_ray.dataset.packages": "squeez_ray.collect.sources.packages",
    "squeez_ray.dataset.scratch": "squeez_ray.collect.sources.scratch",
    "squeez_ray.train.plan": "squeez_ray.train.memory_plan",
    "squeez_ray.evaluate.runner": "squeez_ray.evaluate.local",
}

# old packages that no longer exist as a whole: importing one gives an empty package, so that its
# old submodules (in MOVED) import through it
DISSOLVED: dict[str, str] = {
    "squeez_ray.encoder": "infer/encoder_* (runtime), train/encoder_* (training, export, shipping)",
    "squeez_ray.handlabel": "label/hand_*, dataset/ (merge, datasheet), collect/pool + collect/sources/",
}


class _AliasLoader:
    """Hands the import system the already-imported new module instead of making a new one."""

    @staticmethod
    def create_module(spec: ModuleSpec) -> Any:
        if spec.name in DISSOLVED:
            package = ModuleType(spec.name, f"Moved: {DISSOLVED[spec.name]}.")
            # A package, so its old submodules import (through this finder). Its old folder stays on
            # the path: a module that a later merge drops there still imports (test_house flags it).
            package.__path__ = [str(Path(__file__).parent / spec.name.rpartition(".")[2])]
            return package
        return importlib.import_module(MOVED[spec.name])

    @staticmethod
    def exec_module(module: Any) -> None:
        pass  # the new module ran when it was imported


class _AliasFinder:
    """First on ``sys.meta_path``, and it answers only for the old names: no file stands at those
    paths in this tree, and a stale copy elsewhere (an older editable install) must not answer."""

    @staticmethod
    def find_spec(fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if fullname in MOVED or fullname in DISSOLVED:
            return ModuleSpec(fullname, _AliasLoader(), is_package=fullname in DISSOLVED)
        return None


def install() -> None:
    if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())
