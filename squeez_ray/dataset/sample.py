"""A small real dataset from local sources only: ``python jobs/sample_data.py --out DIR``.

Sources: this repository's checkout (files and git history), installed packages' sources in
site-packages, and scratch projects with real bugs (real pytest, python, ruff, mypy, pip and git
runs over them). The rule teacher labels the outputs, then the same QA, split, negatives and
writer as ``jobs/build_dataset.py`` produce train / dev / test Parquet in the project schema.

To scale up (more packages, unpacked sdists, checkouts): pass more trees to :func:`build_sample`
through ``packages`` / ``source_dirs``, or call the steps yourself::

    trees = installed_package_trees(names) + [directory_tree(d) for d in dirs]
    observations, _ = gather_observations(trees, CallBudget(read_file=20, grep=15), workers=8)
    rows, dropped = label_rows_with_rules(observations)
    build_from_examples([to_example(r, "local") for r in rows], BuildConfig(output_dir=...))
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squeez_ray.config import to_dict
from squeez_ray.dataset.build import BuildConfig, build_from_examples
from squeez_ray.collect.sources.scratch import make_projects
from squeez_ray.collect.sources.source_tree import (CallBudget, SourceTree, directory_tree, installed_package_trees, plan_calls,
                                        run_calls)

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE = "local"  # the ``source`` of examples labelled from local tool runs by the rule teacher

# Pure-Python packages the project's environment installs anyway (dependencies of its dependencies).
DEFAULT_PACKAGES = ["click", "idna", "jinja2", "markupsafe", "h11", "iniconfig", "jmespath", "mdurl", "dotenv",
                    "cachetools", "filelock", "pluggy", "packaging", "markdown_it"]


@dataclass
class SampleConfig:
    output_dir: str = "data/sample"  # jobs/sample_data.py: --out
    packages: list[str] = field(default_factory=lambda: list(DEFAULT_PACKAGES))  # import names in site-packages
    source_dirs: list[str] = field(default_factory=list)  # more directories of code (checkouts, unpacked sdists)
    include_this_repo: bool = True  # this checkout's files and git history (skipped without .git)
    scratch_projects: int = 6  # throwaway projects with failing tests, tracebacks, lint and type errors
    budget: CallBudget = field(default_factory=CallBudget)
    workers: int = 2  # tool runs in parallel
    timeout_s: float = 60.0  # per tool call
    seed: int = 0  # seeds the call plan and the splits
    build: BuildConfig = field(default_factory=BuildConfig)
    overwrite: bool = False  # rebuild even if output_dir already holds a sample


def gather_observations(trees: list[SourceTree], budget: CallBudget, *, workers: int = 2, seed: int = 0,
                        timeout_s: float = 60.0) -> tuple[list[dict[str, Any]], Counter]:
    """Plan and run tool calls over ``trees``; the plug point for more sources."""
    calls = [call for tree in trees for call in plan_calls(tree, budget, seed)]
    log.info("running %d tool calls over %d source trees", len(calls), len(trees))
    return run_calls(calls, workers=workers, timeout_s=timeout_s)


def sample_trees(config: SampleConfig, scratch_root: Path) -> list[SourceTree]:
    trees = installed_package_trees(config.packages)
    trees += [directory_tree(d) for d in config.source_dirs]
    if config.include_this_repo and (REPO_ROOT / ".git").exists():
        trees.append(SourceTree("squeez-ray", REPO_ROOT, has_git=True))
    projects = make_projects(scratch_root, config.scratch_projects, seed=config.seed)
    trees += [SourceTree(f"scratch/{p.name}", p, has_git=True, runs_code=True) for p in projects]
    return trees


def build_sample(config: SampleConfig) -> dict[str, Any]:
    from squeez_ray.label.pipeline import label_rows_with_rules
    from squeez_ray.label.stages import to_example
    from squeez_ray.schema import write_examples, write_observations

    out = Path(config.output_dir)
    if (out / "manifest.json").exists() and not config.overwrite:
        import json

        log.info("%s already holds a sample (manifest.json); pass --overwrite to rebuild", out)
        return json.loads((out / "manifest.json").read_text())
    started = time.time()
    scratch_root = Path(tempfile.mkdtemp(prefix="squeez-sample-"))
    try:
        trees = sample_trees(config, scratch_root)
        observations, call_failures = gather_observations(trees, config.budget, workers=config.workers,
                                                          seed=config.seed, timeout_s=config.timeout_s)
        # Intermediates as JSONL: the folder's Parquet files are exactly train/dev/test, so the
        # folder itself is a valid ``train_path`` (read_examples reads every .parquet under it).
        write_observations(observations, out / "observations.jsonl")
        rows, label_drops = label_rows_with_rules(observations)
        examples = [to_example(row, SOURCE) for row in rows]
        write_examples(examples, out / "labelled.jsonl")
        build = BuildConfig(**{**config.build.__dict__, "output_dir": str(out)})
        manifest = build_from_examples(examples, build, inputs=[str(t.path) for t in trees], extra_manifest={
            "job": "sample_data",
            "sample_config": to_dict(config),
            "sources": [t.name for t in trees],
            "observations": len(observations),
            "tool_calls_skipped": dict(call_failures),
            "label_dropped": dict(label_drops),
            "tool_types": dict(Counter(e["tool_type"] for e in examples)),
        })
    finally:
        shutil.rmtree(scratch_root, ignore_errors=True)
    manifest["seconds_total"] = round(time.time() - started, 2)
    from squeez_ray.io_utils import write_json_atomic

    write_json_atomic(out / "manifest.json", manifest)
    return manifest
