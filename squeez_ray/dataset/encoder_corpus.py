"""The encoder's training set at scale, in one job: ``python jobs/build_encoder_data.py``.

PyPI packages (``squeez_ray.collect.sources.packages``) plus the labelling helper's local sources (scratch
projects with real bugs, this checkout) -> real tool runs -> the rule teacher -> the same QA, group
splits (one package = one group, so dev/test packages are unseen in training), negatives and
writer as ``jobs/build_dataset.py``. Per-package observations are cached, so a rerun (or a resume
after an interruption) only runs the packages still missing; the final labelling and build are
cheap and always redone from the cached observations.

Other labelled data in the project's formats (released Squeez data, teacher-labelled sets) needs
no builder: ``jobs/train_encoder.py train_data=...`` reads anything ``read_examples`` reads.
"""

from __future__ import annotations

import json
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
from squeez_ray.collect.sources.packages import PackageRunConfig, PackageSpec, observe_package, read_observations
from squeez_ray.collect.sources.source_tree import CallBudget

log = logging.getLogger(__name__)

SOURCE = "local"  # rule-teacher labels of real local tool runs, as in jobs/sample_data.py


def _package_budget() -> CallBudget:
    # Reads and greps are cheap (ms) and label well; test, type-check and build runs cost ~1-2 s each.
    return CallBudget(read_file=60, grep=50, ls=6, lint_output=10, type_check=4, git_log=5, git_blame=8,
                      git_diff=8, test_output=8, python=10, pip_install=3, build_output=1)


@dataclass
class EncoderDataConfig:
    output_dir: str = "runs/encoder_data"  # the splits, labelled.jsonl, manifest, stats
    cache_dir: str = "runs/encoder_data_cache"  # downloads, unpacked sources, per-package observations
    # PyPI packages to download and run tools over (name, version)
    packages: list[PackageSpec] = field(default_factory=list)
    budget: CallBudget = field(default_factory=_package_budget)
    scratch_projects: int = 8  # the labelling helper's scratch projects with real bugs (tracebacks, lint)
    include_this_repo: bool = False  # also run tools over this checkout
    min_packages: int = 30  # fail loudly rather than train on a thin, unrepresentative set
    workers: int = 2  # packages observed in parallel
    timeout_s: float = 60.0  # per tool call
    seed: int = 0  # seeds the call plan and the splits
    build: BuildConfig = field(default_factory=BuildConfig)

    def validate(self) -> list[str]:
        problems = []
        if not self.packages:
            problems.append("packages: list at least one {name, version} (see jobs/configs/encoder_data.yaml)")
        names = [p.name for p in self.packages]
        if len(set(names)) != len(names):
            problems.append("packages: a package is listed twice")
        return problems


def build_encoder_data(config: EncoderDataConfig) -> dict[str, Any]:
    from squeez_ray.dataset.sample import REPO_ROOT
    from squeez_ray.collect.sources.scratch import make_projects
    from squeez_ray.collect.sources.source_tree import SourceTree, plan_calls, run_calls
    from squeez_ray.io_utils import write_json_atomic
    from squeez_ray.label.pipeline import label_rows_with_rules
    from squeez_ray.label.stages import to_example
    from squeez_ray.schema import write_examples

    started = time.time()
    cache = Path(config.cache_dir).resolve()
    run = PackageRunConfig(budget=config.budget, workers=config.workers, timeout_s=config.timeout_s,
                           seed=config.seed)
    observations: list[dict[str, Any]] = []
    packages: dict[str, Any] = {}
    failed: dict[str, str] = {}
    for index, spec in enumerate(config.packages, start=1):
        t0 = time.time()
        try:
            path, info = observe_package(spec, cache, run)
        except Exception as error:  # noqa: BLE001 - one broken package (yanked version, odd archive) must not sink the build
            failed[spec.key] = f"{type(error).__name__}: {error}"[:500]
            log.warning("[%d/%d] %s failed: %s", index, len(config.packages), spec.key, failed[spec.key])
            continue
        observations.extend(read_observations(path))
        packages[spec.key] = info
        log.info("[%d/%d] %s: %d observations (%.1fs)", index, len(config.packages), spec.key,
                 info["observations"], time.time() - t0)
    if len(packages) < config.min_packages:
        raise RuntimeError(f"only {len(packages)} packages gave observations (min_packages={config.min_packages}); "
                           f"failures: {json.dumps(failed)}")

    local = cache / "observations" / f"_local-{config.scratch_projects}-{int(config.include_this_repo)}.jsonl"
    if not local.exists():
        scratch = Path(tempfile.mkdtemp(prefix="squeez-encoder-scratch-"))
        try:
            trees = [SourceTree(f"scratch/{p.name}", p, has_git=True, runs_code=True)
                     for p in make_projects(scratch, config.scratch_projects, seed=config.seed)]
            if config.include_this_repo and (REPO_ROOT / ".git").exists():
                trees.append(SourceTree("squeez-ray", REPO_ROOT, has_git=True))
            calls = [c for t in trees for c in plan_calls(t, CallBudget(), config.seed)]
            rows, _ = run_calls(calls, workers=config.workers, timeout_s=config.timeout_s)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        from squeez_ray.io_utils import write_text_atomic

        write_text_atomic(local, "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in rows))
    observations.extend(read_observations(local))

    rows, label_drops = label_rows_with_rules(observations)
    examples = [to_example(row, SOURCE) for row in rows]
    out = Path(config.output_dir)
    write_examples(examples, out / "labelled.jsonl")
    build = BuildConfig(**{**config.build.__dict__, "output_dir": str(out)})
    manifest = build_from_examples(examples, build, inputs=[str(cache)], extra_manifest={
        "job": "build_encoder_data",
        "encoder_data_config": to_dict(config),
        "packages": packages,
        "packages_failed": failed,
        "observations": len(observations),
        "label_dropped": dict(label_drops),
        "tool_types": dict(Counter(e["tool_type"] for e in examples)),
        "repos": len({e["repo"] for e in examples}),
    })
    manifest["seconds_total"] = round(time.time() - started, 1)
    write_json_atomic(out / "manifest.json", manifest)
    return manifest
