"""Re-prune a tree of stored agent runs on Ray Data, resumably.

Design: ``from_items(units)`` -> ``map_batches(RepruneWorker, ActorPoolStrategy)``. Each actor
builds the pruner once (a vLLM engine loads once per actor, not per file) and takes a batch of
``files_per_batch`` whole files: it loads them, prunes all their observations together in
backend-sized batches, and writes each file atomically with its done-marker. The simpler-looking
alternative, ``flat_map`` observations -> prune -> ``groupby`` file -> write, needs an all-to-all
regroup (a barrier, and the parsed documents shipped through the object store) only to write
files back; batching several files per actor call already gives the engine full batches across
files, so there is nothing to regroup. A unit is written whole or not at all, so a killed run
resumes by skipping units whose marker matches their output.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from squeez_ray.infer.registry import BACKENDS, BackendOptions, build_pruner
from squeez_ray.evaluate.local import token_counter
from squeez_ray.io_utils import git_revision, write_json_atomic, write_text_atomic
from squeez_ray.errors import JobError
from squeez_ray.trajectories import report as report_mod
from squeez_ray.ray_init import init_ray
from squeez_ray.trajectories.detect import ADAPTERS
from squeez_ray.trajectories.resume import STATE_DIR, is_done, redo_reason
from squeez_ray.trajectories.tree import InputTree, copy_link, scan_tree
from squeez_ray.trajectories.process import (
    RepruneSettings,
    chars_over_4,
    process_units,
)

log = logging.getLogger(__name__)
REPORT_FILES = ("manifest.json", "report.json", "report.md", STATE_DIR)


class RepruneError(JobError, ValueError):  # JobError: the job runner reports it as one line, exit 2
    """A problem with the job's inputs or flags (one clear message, no traceback)."""


@dataclass
class RepruneConfig:
    settings: RepruneSettings
    backend: str = "bm25"
    options: BackendOptions = field(default_factory=BackendOptions)
    workers: int = 1  # actors, each holding one pruner
    files_per_batch: int = 4  # whole files per actor call: their observations share engine batches
    cpus_per_worker: float = 0.5
    gpus_per_worker: float = 0.0  # 1 for a vLLM / transformers engine on a GPU node

    def validate(self) -> list[str]:
        s = self.settings
        problems = []
        if self.backend not in BACKENDS:
            problems.append(f"backend {self.backend!r} is unknown (choose one of: {', '.join(BACKENDS)})")
        if s.format is not None and s.format not in ADAPTERS:
            problems.append(f"format {s.format!r} is unknown (choose one of: {', '.join(ADAPTERS)})")
        if s.query_source not in ("thought", "action", "task", "fixed"):
            problems.append(f"query source {s.query_source!r} must be thought, action, task or fixed")
        if s.query_source == "fixed" and not s.query:
            problems.append("query source 'fixed' needs --query TEXT")
        for name, value in (("workers", self.workers), ("files_per_batch", self.files_per_batch),
                            ("batch_size", s.batch_size)):
            if value < 1:
                problems.append(f"{name} must be at least 1, got {value}")
        source, target = Path(s.input_dir).resolve(), Path(s.output_dir).resolve()
        if not source.is_dir():
            problems.append(f"input {s.input_dir} is not a directory")
        elif target.exists() and not target.is_dir():
            problems.append(f"output {s.output_dir} is a file: give a folder (it is created if missing)")
        elif target == source or source in target.parents or target in source.parents:
            problems.append(f"output {s.output_dir} must lie outside input {s.input_dir} (inputs are never touched)")
        return problems


class RepruneWorker:
    """A Ray Data actor: one pruner, many files."""

    def __init__(self, config: RepruneConfig):
        self.config = config
        self.pruner = build_pruner(config.backend, config.options)
        self.count_tokens = token_counter(config.options)[0] or chars_over_4

    def __call__(self, batch: dict[str, Any]) -> dict[str, list]:
        stats = process_units([str(u) for u in batch["unit"]], self.pruner, self.config.settings, self.count_tokens)
        return {"unit": [s.unit for s in stats], "status": [s.status for s in stats],
                "observations": [s.observations for s in stats], "pruned": [s.pruned for s in stats]}


def pending_units(config: RepruneConfig) -> tuple[list[str], list[str]]:
    """(all units, units still to do): see ``resume.redo_reason``."""
    _, units, reasons = scan_inputs(config)
    return units, list(reasons)


def scan_inputs(config: RepruneConfig) -> tuple[InputTree, list[str], dict[str, str]]:
    """The input tree, its units, and each unit still to do with the reason."""
    tree = scan_tree(Path(config.settings.input_dir))
    units = tree.units
    clashes = [u for u in units + tree.links if u.split("/")[0] in REPORT_FILES]
    if clashes:
        raise RepruneError(f"input holds {clashes[0]!r}, a name the job writes at the output root; rename it")
    reasons = {u: why for u in units if (why := redo_reason(config.settings.output_dir, config.settings.input_dir, u))}
    return tree, units, reasons


def run_reprune(config: RepruneConfig, *, echo: bool = True) -> dict[str, Any]:
    """Re-prune every pending unit, then write report.json, report.md and manifest.json; return the report."""
    problems = config.validate()
    if problems:
        raise RepruneError("invalid re-prune settings:\n  - " + "\n  - ".join(problems))
    settings = config.settings
    started = time.time()
    _check_same_settings(config)
    tree, units, reasons = scan_inputs(config)
    todo = list(reasons)
    shutil.rmtree(Path(settings.output_dir) / STATE_DIR / "tmp", ignore_errors=True)  # half-built dirs of a killed run
    for link in tree.links:  # never followed: the same link in the output
        copy_link(Path(settings.input_dir) / link, Path(settings.output_dir) / link)
    if echo:
        why = {r: list(reasons.values()).count(r) for r in sorted(set(reasons.values()))}
        detail = f" ({', '.join(f'{n} {r}' for r, n in why.items())})" if why else ""
        print(f"re-prune: {len(units)} unit(s) under {settings.input_dir}; {len(units) - len(todo)} already done, "
              f"{len(todo)} to do{detail}", flush=True)
    if todo:
        _run_ray(config, todo, echo)
    unit_stats = [is_done(settings.output_dir, u) for u in units]
    missing = [u for u, s in zip(units, unit_stats) if s is None]
    if missing:
        raise RepruneError(f"{len(missing)} unit(s) have no complete output after the run, e.g. {missing[0]}")
    summary = report_mod.summarize([s for s in unit_stats if s is not None], token_counter(config.options)[1])
    summary["links_copied"] = tree.links
    summary["skipped"] = [{"path": path, "why": why} for path, why in tree.skipped]
    resolved = _resolved_config(config)
    out = Path(settings.output_dir)
    write_json_atomic(out / "report.json", summary)
    write_text_atomic(out / "report.md", report_mod.markdown(summary, resolved))
    write_json_atomic(out / "manifest.json", {
        "job": "reprune", "config": resolved, "git_revision": git_revision(), "inputs": [str(Path(settings.input_dir))],
        "output": str(out), "units": len(units), "done_before_this_run": len(units) - len(todo),
        "processed_this_run": len(todo), "counts": summary["total"], "failed_files": len(summary["failed_files"]),
        "failed_observations": len(summary["failed_observations"]), "seconds": round(time.time() - started, 2)})
    if echo:
        print(report_mod.table(summary))
        print(f"(tokens are {summary['token_note']}; report: {out / 'report.md'})")
        for failure in summary["failed_files"]:
            print(f"could not read {failure['unit']} (copied unchanged): {failure['error']}")
        for item in summary["skipped"]:
            print(f"skipped {item['path']}: {item['why']}")
        if summary["links_copied"]:
            print(f"{len(summary['links_copied'])} symbolic link(s) copied as links, not followed")
        if summary["failed_observations"]:
            files = len({f["unit"] for f in summary["failed_observations"]})
            print(f"{len(summary['failed_observations'])} observation(s) in {files} file(s) still failing in the "
                  "backend (left unpruned; rerun to retry them); see report.md")
    return summary


def _run_ray(config: RepruneConfig, todo: list[str], echo: bool) -> None:
    import ray

    init_ray()
    blocks = max(1, -(-len(todo) // config.files_per_batch))
    dataset = ray.data.from_items([{"unit": u} for u in todo], override_num_blocks=blocks)
    dataset = dataset.map_batches(RepruneWorker, fn_constructor_kwargs={"config": config},
                                  batch_size=config.files_per_batch,
                                  compute=ray.data.ActorPoolStrategy(size=config.workers),
                                  num_cpus=config.cpus_per_worker, num_gpus=config.gpus_per_worker or None)
    from squeez_ray.progress import Progress

    with Progress("re-prune", total=len(todo), unit="files", enabled=None if echo else False) as progress:
        for done, row in enumerate(dataset.iter_rows(), start=1):
            if echo and not progress.enabled:  # a log: one line per file
                print(f"[{done}/{len(todo)}] {row['unit']}: {row['status']}, {row['pruned']} of "
                      f"{row['observations']} observation(s) pruned", flush=True)
            progress.update(1, observations=progress.fields.get("observations", 0) + row["observations"])


# Knobs that change how fast, not what: a resumed run may use other values.
_SPEED_ONLY = {"workers", "files_per_batch", "cpus_per_worker", "gpus_per_worker", "output_dir", "timeout_s",
               "max_retries", "max_concurrency", "batch_size"}


def _check_same_settings(config: RepruneConfig) -> None:
    """Refuse to resume into an output tree written with other settings (its files would be kept)."""
    path = Path(config.settings.output_dir) / STATE_DIR / "settings.json"
    current = _what_decides_output(config)
    if path.is_file():
        before = json.loads(path.read_text(encoding="utf-8"))
        changed = sorted(k for k in set(before) | set(current) if before.get(k) != current.get(k))
        if changed:
            raise RepruneError(f"{config.settings.output_dir} holds a run made with other settings "
                               f"({', '.join(f'{k}: {before.get(k)!r} -> {current.get(k)!r}' for k in changed[:5])}); "
                               "use a new --output, or delete it to start over")
    else:
        write_json_atomic(path, current)


def _what_decides_output(config: RepruneConfig) -> dict[str, Any]:
    resolved = _resolved_config(config)
    flat = {**{k: v for k, v in resolved.items() if k != "backend_options"},
            **{f"backend_options.{k}": v for k, v in resolved["backend_options"].items()}}
    flat["input_dir"] = str(Path(config.settings.input_dir).resolve())
    return json.loads(json.dumps({k: v for k, v in flat.items() if k.split(".")[-1] not in _SPEED_ONLY},
                                 default=str))


def _resolved_config(config: RepruneConfig) -> dict[str, Any]:
    options = asdict(config.options)
    if options.get("api_key"):
        options["api_key"] = "***"
    return {"backend": config.backend, "workers": config.workers, "files_per_batch": config.files_per_batch,
            "cpus_per_worker": config.cpus_per_worker, "gpus_per_worker": config.gpus_per_worker, **asdict(config.settings), "backend_options": options}
