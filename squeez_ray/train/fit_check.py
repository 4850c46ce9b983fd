"""Does the training config fit the card the workers get? Checked where they run, before the first step.

``jobs/train.py`` is usually submitted from a cluster head that has no GPU, so the driver cannot see
the workers' card. Before ``trainer.fit()`` one Ray task asks for exactly a worker's resources (GPU,
CPUs, extra resources, ``scaling.accelerator_type``), so it lands on the kind of node the workers will,
and reads the real device there; the driver plans the config against it and refuses with one line.
Each worker repeats the comparison at start (``check_this_device``), for clusters with mixed cards.
"""

from __future__ import annotations

import logging
from typing import Any

from squeez_ray.errors import JobError
from squeez_ray.train.devices import Device

log = logging.getLogger(__name__)


class DoesNotFit(JobError, ValueError):  # JobError: the job runner reports it as one line, exit 2
    """The memory plan of one worker is larger than its card."""


def refusal(plan: Any) -> str:
    """One line naming the plan, the card and the knobs that shrink the plan."""
    return (f"this config needs about {plan.total / 2**30:.1f} GiB per worker on {plan.device.name} "
            f"({plan.device.memory_bytes / 2**30:.1f} GiB): lower train.max_tokens_per_batch (now "
            f"{plan.tokens_per_batch}), turn on model.gradient_checkpointing, or use a larger card / ZeRO-3")


def worker_task_options(config: Any) -> dict[str, Any]:
    """Ray task options that ask for one training worker's resources (see run.py's ScalingConfig)."""
    scaling = config.scaling
    options: dict[str, Any] = {"num_cpus": scaling.cpus_per_worker, "num_gpus": 1 if scaling.use_gpu else 0}
    if scaling.resources_per_worker:
        options["resources"] = dict(scaling.resources_per_worker)
    if scaling.accelerator_type:
        options["accelerator_type"] = scaling.accelerator_type
    return options


def _device_here() -> tuple[str, int] | None:
    from squeez_ray.train.devices import detect_device

    device = detect_device()
    return None if device is None else (device.name, device.memory_bytes)


def probe_worker_device(config: Any) -> Device | None:
    """The CUDA card on a node that can host a training worker (waits for the autoscaler), or None (no CUDA)."""
    import ray

    from squeez_ray.train.devices import cuda_device

    found = ray.get(ray.remote(_device_here).options(**worker_task_options(config)).remote())
    return cuda_device(*found) if found else None


def check_fit_on_workers(config: Any, probe=probe_worker_device) -> Any:
    """Plan ``config`` against the workers' real card; DoesNotFit when it cannot fit. Returns the plan (or None
    when the workers have no CUDA device, e.g. CPU runs)."""
    from squeez_ray.train.memory_plan import plan_memory

    device = probe(config)
    if device is None:
        return None
    plan = plan_memory(config, device)
    log.info("memory plan on the workers' %s: %.1f of %.1f GiB", device.name, plan.total / 2**30,
             device.memory_bytes / 2**30)
    if not plan.fits:
        raise DoesNotFit(refusal(plan))
    return plan


def check_this_device(planned_bytes: int) -> None:
    """Inside a training worker: refuse before loading weights when this worker's card is smaller than the plan."""
    import torch

    if not torch.cuda.is_available():
        return
    total = int(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
    if planned_bytes > total:
        raise DoesNotFit(f"this worker's {torch.cuda.get_device_name()} has {total / 2**30:.1f} GiB; the memory plan "
                         f"needs {planned_bytes / 2**30:.1f} GiB (jobs/train.py --plan shows the parts)")


def plan_on_driver(config: Any, device_name: str | None, *, always: bool) -> bool:
    """jobs/train.py, before Ray starts: the memory plan on the card ``device_name`` names, the GPU here, or
    ``scaling.accelerator_type``; printed always with ``always`` (--plan) or when it does not fit. True
    ends the job (--plan: the plan was the job); a JobError refuses a plan that cannot fit."""
    from squeez_ray.train.devices import accelerator_device, detect_device, named_device
    from squeez_ray.train.memory_plan import plan_memory

    device, note = (named_device(device_name), "") if device_name else (detect_device(), "")
    if device is None and config.scaling.accelerator_type:
        device = accelerator_device(config.scaling.accelerator_type)
        note = f" (scaling.accelerator_type {config.scaling.accelerator_type}; the workers' card is checked again at start)"
    if device is None:
        if not always:  # the driver has no GPU (e.g. a cluster head): the workers' cards are unknown here
            return False
        device = named_device("a100-80gb" if config.scaling.use_gpu else "cpu")
        note = " (no GPU here; --device names another)" if config.scaling.use_gpu else ""
    plan = plan_memory(config, device)
    if always or not plan.fits:
        print(plan.table() + note, flush=True)
    if not plan.fits:
        raise JobError(refusal(plan))
    return always
