"""Before any GPU-hour: check, on the nodes that will run the training workers, everything that would fail there.

The driver reserves the same placement group Ray Train will (one bundle per worker: its CPUs, GPU,
extra resources and ``scaling.accelerator_type``, with the run's placement strategy), so the autoscaler
starts the same nodes, and runs one small task in each bundle. Each task reports what it finds on its
node: the Python version, installed package versions against the constraints file, the Qwen 3.5
kernels importing *and* running a tiny op (GPU runs of a linear-attention model), its CUDA card (the
driver plans the config's memory against it), a marker file the driver wrote into ``run.storage_path``
(shared storage visible from every node), the base model and the data files. Every problem is one line
naming the node; nothing is installed or changed, except the marker, which is removed again.
"""

from __future__ import annotations

import logging
import re
import uuid
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# Without these the training loop cannot start; other pins are compared only where installed.
REQUIRED = ("torch", "transformers", "peft", "accelerate", "datasets", "ray", "pyarrow")


def read_pins(path: str | Path) -> dict[str, str]:
    """``name==version`` lines of a constraints file (comments and other specifiers ignored)."""
    pins = {}
    for line in Path(path).read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;#]+)", line.strip())
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def _exists(path: str) -> bool:
    if "://" in path:
        import pyarrow.fs

        filesystem, inner = pyarrow.fs.FileSystem.from_uri(path)
        return filesystem.get_file_info(inner).type != pyarrow.fs.FileType.NotFound
    return Path(path).exists()


def node_check(spec: dict[str, Any]) -> dict[str, Any]:
    """Runs in a Ray task on a worker's node: its facts and its problems (one line each)."""
    import platform
    import sys
    from importlib import metadata

    import ray

    problems: list[str] = []
    if sys.version_info < (3, 11):
        problems.append(f"Python {platform.python_version()} ({sys.executable}); the project needs >= 3.11")
    for name, pinned in spec["pins"].items():
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            if name in spec["required"]:
                problems.append(f"{name} is not installed (constraints: {pinned})")
            continue
        if have.split("+")[0] != pinned.split("+")[0]:
            problems.append(f"{name} {have} is installed; {spec['constraints']} says {pinned}")
    if spec["kernels"]:
        from squeez_ray.train.kernels import kernel_problems

        problems += [f"{name} {problem}" for name, problem in kernel_problems().items()]
    if not _exists(spec["marker"]):
        problems.append(f"run.storage_path {spec['storage']} is not shared: the driver's marker file is not "
                        "visible here (use the shared mount, /mnt/shared/runs on cluster.yaml, or an s3:// URI)")
    for key, path in spec["paths"].items():
        if not _exists(path):
            problems.append(f"{key}: {path} does not exist on this node")
    if spec["model"]:
        from squeez_ray.hub import ModelNotFoundError, resolve_model

        try:
            resolve_model(spec["model"], what="model.base")
        except ModelNotFoundError as error:
            problems.append(str(error))
    from squeez_ray.train.fit_check import _device_here

    return {"node": ray.util.get_node_ip_address(), "device": _device_here(), "problems": problems}


def _bundle(config: Any) -> dict[str, float]:
    scaling = config.scaling
    bundle = {"CPU": float(scaling.cpus_per_worker), **{k: float(v) for k, v in scaling.resources_per_worker.items()}}
    if scaling.use_gpu:
        bundle["GPU"] = 1.0
    if scaling.accelerator_type:
        bundle[f"accelerator_type:{scaling.accelerator_type}"] = 0.001  # what Ray Train asks for
    return bundle


def _spec(config: Any, constraints: str, marker: str) -> dict[str, Any]:
    from squeez_ray.train.config import TINY_MODELS
    from squeez_ray.train.memory_plan import PlanError, model_config

    gpu = config.scaling.use_gpu and not config.train.use_cpu
    required = set(REQUIRED) | ({"deepspeed"} if config.train.deepspeed else set())
    try:
        architecture = model_config(config)
        linear = str(getattr(architecture, "model_type", "")).startswith("qwen3_5")
    except PlanError:
        linear = "qwen3.5" in config.model.base.lower()
    base = config.model.base
    built_on_driver = config.model.random_init or base in TINY_MODELS
    paths = {key: path for key, path in (("data.train_path", config.data.train_path),
                                         ("data.eval_path", config.data.eval_path)) if path}
    return {"pins": read_pins(constraints), "constraints": Path(constraints).name, "required": sorted(required),
            "kernels": gpu and linear, "marker": marker, "storage": config.run.storage_path, "paths": paths,
            "model": None if built_on_driver else base}


def _write_marker(storage: str) -> str:
    name = f".squeez-preflight-{uuid.uuid4().hex[:12]}"
    if "://" in storage:
        import pyarrow.fs

        filesystem, inner = pyarrow.fs.FileSystem.from_uri(storage)
        filesystem.create_dir(inner, recursive=True)
        with filesystem.open_output_stream(f"{inner.rstrip('/')}/{name}") as stream:
            stream.write(b"preflight\n")
        return f"{storage.rstrip('/')}/{name}"
    folder = Path(storage).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("preflight\n")
    return str(folder / name)


def _remove_marker(marker: str) -> None:
    try:
        if "://" in marker:
            import pyarrow.fs

            filesystem, inner = pyarrow.fs.FileSystem.from_uri(marker)
            filesystem.delete_file(inner)
        else:
            Path(marker).unlink(missing_ok=True)
    except OSError as error:
        log.warning("could not remove the preflight marker %s: %s", marker, error)


def run_preflight(config: Any, *, constraints: str, timeout_s: float = 900.0) -> list[str]:
    """Problems found on the workers' nodes, one line each (empty: the job can start). Ray must be up."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from squeez_ray.train.devices import cuda_device
    from squeez_ray.train.fit_check import refusal
    from squeez_ray.train.memory_plan import PlanError, plan_memory

    marker = _write_marker(config.run.storage_path)
    spec = _spec(config, constraints, marker)
    bundle = _bundle(config)
    group = placement_group([dict(bundle) for _ in range(config.scaling.num_workers)],
                            strategy=config.scaling.placement_strategy)
    try:
        ready, _ = ray.wait([group.ready()], timeout=timeout_s)
        if not ready:
            return [f"no node could host the {config.scaling.num_workers} training worker(s) ({bundle} each, "
                    f"{config.scaling.placement_strategy}) within {timeout_s:.0f} s: check the cluster's node "
                    "types, scaling.accelerator_type and the autoscaler's log"]
        task = ray.remote(node_check)
        refs = [task.options(num_cpus=bundle["CPU"], num_gpus=bundle.get("GPU", 0),
                             scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i))
                .remote(spec) for i in range(config.scaling.num_workers)]
        reports = ray.get(refs, timeout=timeout_s)
    finally:
        remove_placement_group(group)
        _remove_marker(marker)
    problems: list[str] = []
    seen: set[str] = set()
    for index, report in enumerate(reports):
        lines = list(report["problems"])
        if report["device"]:
            try:
                plan = plan_memory(config, cuda_device(*report["device"]))
                if not plan.fits:
                    lines.append(refusal(plan))
            except PlanError as error:
                lines.append(f"memory plan: {error}")
        elif config.scaling.use_gpu and not config.train.use_cpu:
            lines.append("no CUDA device visible in a GPU worker's slot (torch without CUDA, or a driver problem)")
        for line in lines:
            text = f"worker {index} on {report['node']}: {line}"
            if line + report["node"] not in seen:  # one line per problem and node
                seen.add(line + report["node"])
                problems.append(text)
    return problems
