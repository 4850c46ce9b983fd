"""The training job: read and tokenise the data with Ray Data, fit with a Ray Train TorchTrainer, write a manifest.

One run = ``run.storage_path / run.name``: Ray Train keeps its checkpoints and run snapshot there, so a
job resubmitted with the same name (or restarted by Ray after a failure) continues from the latest
checkpoint instead of from zero. The driver also keeps the resolved base model (for tiny / random
bases) and ``manifest.json`` there.
"""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from squeez_ray.config import to_dict
from squeez_ray.model_family import family_of
from squeez_ray.progress import progress_enabled
from squeez_ray.prompt_ranges import default_system_prompt
from squeez_ray.io_utils import git_revision, write_json_atomic
from squeez_ray.ray_init import init_ray
from squeez_ray.errors import JobError
from squeez_ray.train.config import TrainConfig

log = logging.getLogger(__name__)


class TrainJobError(JobError, RuntimeError):  # JobError: the job runner reports it as one line, exit 2
    """A user-facing problem with the job's inputs (named file, field), reported without a traceback."""


@dataclass
class TrainOutcome:
    run_dir: str
    checkpoint: str | None  # the latest checkpoint folder (adapter + squeez_train.json)
    metrics: dict[str, Any]
    counts: dict[str, int]
    manifest: str


def _is_uri(path: str) -> bool:
    return "://" in path


def init_adapter_problems(config: TrainConfig) -> list[str]:
    """model.init_adapter must be a PEFT LoRA directory of the lora section's rank and alpha: the
    manifest and the merge describe the adapter by that section."""
    path = Path(config.model.init_adapter).expanduser()
    adapter_config = path / "adapter_config.json"
    if not adapter_config.is_file():
        return [f"model.init_adapter: {path} holds no adapter_config.json (a LoRA checkpoint directory)"]
    try:
        found = json.loads(adapter_config.read_text())
    except json.JSONDecodeError as error:
        return [f"model.init_adapter: {adapter_config} is not valid JSON ({error})"]
    wanted = {"r": config.lora.r, "lora_alpha": config.lora.alpha}
    if any(found.get(key) != value for key, value in wanted.items()):
        return [f"model.init_adapter: {path} has r={found.get('r')} alpha={found.get('lora_alpha')}, the lora section "
                f"says r={config.lora.r} alpha={config.lora.alpha}; make them agree"]
    return []


def check_inputs(config: TrainConfig) -> None:
    """The filesystem checks validate() leaves to job start: every problem at once."""
    problems = []
    for key, path in (("data.train_path", config.data.train_path), ("data.eval_path", config.data.eval_path)):
        if path and not _is_uri(path) and not Path(path).exists():
            problems.append(f"{key}: {path} does not exist")
    if not _is_uri(config.run.storage_path):
        from squeez_ray.config import output_dir_problem

        problem = output_dir_problem("run.storage_path", config.run.storage_path)
        problems += [problem] if problem else []
    base = config.model.base
    from squeez_ray.base_models import is_packaged
    from squeez_ray.hub import is_hub_id
    from squeez_ray.train.config import TINY_MODELS

    if base and base not in TINY_MODELS and not config.model.random_init and not is_hub_id(base) \
            and not is_packaged(base) \
            and not _is_uri(base) and not Path(base).expanduser().is_dir():
        problems.append(f"model.base: {base} is no checkpoint directory (and not a hub id like Org/name)")
    if config.model.init_adapter:
        problems += init_adapter_problems(config)
    if _is_uri(config.run.storage_path) and (config.model.random_init or base.startswith("tiny-")):
        problems.append("model.base: tiny / random bases are built on the driver and need a local run.storage_path")
    if problems:
        raise TrainJobError("cannot start training:\n  - " + "\n  - ".join(problems))


def _fit(trainer: Any) -> Any:
    """``trainer.fit()``; a diverged run (NaN / inf loss or gradient norm, loop.NonFiniteTraining) is
    one line and exit 2, never "done" with a checkpoint of broken weights."""
    from squeez_ray.train.loop import NON_FINITE

    try:
        return trainer.fit()
    except Exception as error:  # Ray wraps the worker's error; its message carries ours
        text = str(error)
        if NON_FINITE not in text:
            raise
        line = next(part for part in text.splitlines() if NON_FINITE in part)
        raise TrainJobError(line[line.index(NON_FINITE):].strip()) from None


def _check_shared_storage(storage_path: str) -> None:
    """Before any worker starts: a multi-node cluster needs storage every node sees."""
    import ray

    from squeez_ray.train.storage import multinode_storage_problem

    # Machines, not raylets: nodes on one machine (Ray's multi-node test cluster, several raylets per
    # host) all see its local folders, so a local path is shared among them.
    machines = len({node.get("NodeManagerAddress") for node in ray.nodes() if node.get("Alive")})
    problem = multinode_storage_problem(storage_path, machines)
    if problem:
        raise TrainJobError("cannot start training:\n  - " + problem)


def _eval_sample(config: TrainConfig) -> list[dict[str, Any]] | None:
    from squeez_ray.train.data import load_rows
    from squeez_ray.train.evaluate import eval_row

    if not config.eval.enabled:
        return None
    path = config.data.eval_path or config.data.train_path
    rows = load_rows(path, config.data.eval_split, what="data.eval_path" if config.data.eval_path else "data.train_path")
    random.Random(config.data.shuffle_seed).shuffle(rows)
    return [eval_row(r) for r in rows[:config.eval.num_examples]]


def run_training(config: TrainConfig, *, config_path: str | None = None) -> TrainOutcome:
    """Fit the LoRA adapter described by ``config``; returns where the latest checkpoint is."""
    import ray.train
    from ray.train.torch import TorchTrainer

    from squeez_ray.train.data import build_train_dataset, load_rows
    from squeez_ray.train.loop import train_loop_per_worker
    from squeez_ray.train.model import resolve_base

    check_inputs(config)
    if config.model.init_adapter:  # workers may start in another directory
        config.model.init_adapter = str(Path(config.model.init_adapter).expanduser().resolve())
    init_ray(log_to_driver=True)  # workers' training logs are the job's progress
    _check_shared_storage(config.run.storage_path)
    plan = None
    if config.scaling.use_gpu and not config.train.use_cpu:
        from squeez_ray.train.fit_check import check_fit_on_workers

        plan = check_fit_on_workers(config)  # on a node like the workers' (the driver may have no GPU)
    storage = config.run.storage_path if _is_uri(config.run.storage_path) else str(Path(config.run.storage_path).resolve())
    run_dir = f"{storage.rstrip('/')}/{config.run.name}"
    local_run_dir = None if _is_uri(storage) else Path(run_dir)
    if local_run_dir:
        local_run_dir.mkdir(parents=True, exist_ok=True)

    started = time.time()
    base = resolve_base(config.model, local_run_dir or Path("."))
    rows = load_rows(config.data.train_path, config.data.train_split, what="data.train_path")
    prepared = build_train_dataset(rows, base, config.data, max_tokens=config.token_budget(),
                                   max_examples=config.train.per_device_batch_size,
                                   num_workers=config.scaling.num_workers, seed=config.train.seed)
    n_batches = prepared.batches_per_worker
    system_prompt = config.data.system_prompt or default_system_prompt(config.data.prompt_format)
    metadata = {
        "base_model": config.model.base, "base_model_path": base, "prompt_format": config.data.prompt_format,
        "model_family": family_of(base).name, "system_prompt": system_prompt, "lora": to_dict(config.lora), "config": to_dict(config),
        "data": {"train_path": config.data.train_path, "eval_path": config.data.eval_path, **prepared.counts},
        "git_revision": git_revision(),
    }
    resources = {"CPU": config.scaling.cpus_per_worker, **config.scaling.resources_per_worker}
    if config.scaling.use_gpu:
        resources["GPU"] = 1
    trainer = TorchTrainer(
        train_loop_per_worker,
        train_loop_config={"config": config, "base": base, "n_batches": n_batches, "metadata": metadata,
                           "eval_rows": _eval_sample(config), "progress": progress_enabled(),
                           "plan_total_bytes": plan.total if plan else None,
                           "deepspeed": json.loads(Path(config.train.deepspeed).read_text()) if config.train.deepspeed else None},
        scaling_config=ray.train.ScalingConfig(num_workers=config.scaling.num_workers, use_gpu=config.scaling.use_gpu,
                                               resources_per_worker=resources,
                                               accelerator_type=config.scaling.accelerator_type,
                                               placement_strategy=config.scaling.placement_strategy),
        run_config=ray.train.RunConfig(
            name=config.run.name, storage_path=storage,
            checkpoint_config=ray.train.CheckpointConfig(
                num_to_keep=config.run.keep_checkpoints, checkpoint_score_attribute=config.run.checkpoint_score,
                checkpoint_score_order=config.run.checkpoint_score_order),
            failure_config=ray.train.FailureConfig(max_failures=config.run.max_failures)),
        datasets={"train": prepared.dataset},
    )
    result = _fit(trainer)
    checkpoint = result.checkpoint.path if result.checkpoint else None
    metrics = {k: v for k, v in (result.metrics or {}).items() if isinstance(v, (int, float, str))}
    manifest = {
        "job": "train", "run_dir": run_dir, "config_path": config_path, "config": to_dict(config),
        "git_revision": git_revision(), "base_model": config.model.base, "base_model_path": base,
        "prompt_format": config.data.prompt_format, "inputs": {"train_path": config.data.train_path, "eval_path": config.data.eval_path},
        "counts": prepared.counts, "batches_per_epoch_per_worker": n_batches, "latest_checkpoint": checkpoint,
        "final_metrics": metrics, "wall_s": round(time.time() - started, 1),
    }
    manifest_path = f"{run_dir}/manifest.json"
    _write_manifest(manifest_path, manifest)
    return TrainOutcome(run_dir, checkpoint, metrics, prepared.counts, manifest_path)


def _write_manifest(path: str, manifest: dict[str, Any]) -> None:
    if not _is_uri(path):
        write_json_atomic(path, manifest)
        return
    import pyarrow.fs

    filesystem, inner = pyarrow.fs.FileSystem.from_uri(path)
    with filesystem.open_output_stream(inner) as stream:
        stream.write((json.dumps(manifest, indent=2, default=str) + "\n").encode())
