"""LoRA fine-tune on Ray Train.

    python jobs/train.py --config jobs/configs/tiny_cpu.yaml [key=value ...]
    python jobs/train.py --config jobs/configs/qwen35_2b_lora.yaml --plan [--device a100-80gb]
    ray job submit --working-dir . -- python jobs/train.py --config jobs/configs/qwen35_2b_lora.yaml

Resubmitting with the same run.name and run.storage_path resumes from the latest checkpoint.
--plan prints the memory plan of one worker on the GPU found here, the one --device names, or (no GPU
here, none named) an 80 GB A100; exit code 2 when it does not fit. Training checks the same plan first
when --device is given or a GPU is found here, and refuses a config that cannot fit before Ray starts.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="YAML config (jobs/configs/*.yaml)")
    parser.add_argument("overrides", nargs="*", help="dotted overrides, e.g. train.max_steps=4 run.name=try2")
    parser.add_argument("--plan", action="store_true", help="print the memory plan and exit (2: does not fit)")
    parser.add_argument("--device", help="plan for this card (a100-80gb, h100-80gb, h200, a100-40gb, l40s, l4, a10g, cpu)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from squeez_ray.config import ConfigError, load_config
    from squeez_ray.schema import DataError
    from squeez_ray.train.config import TrainConfig
    from squeez_ray.train.data import TrainDataError
    from squeez_ray.train.devices import UnknownDevice
    from squeez_ray.train.plan import PlanError
    from squeez_ray.train.run import TrainJobError, run_training

    try:
        config = load_config(TrainConfig, args.config, args.overrides)
        if args.plan or args.device or config.scaling.use_gpu:
            verdict = _memory_plan(config, args.device, always=args.plan)
            if verdict is not None:
                return verdict
        outcome = run_training(config, config_path=args.config)
    except (ConfigError, DataError, TrainJobError, TrainDataError, PlanError, UnknownDevice) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps({"run_dir": outcome.run_dir, "checkpoint": outcome.checkpoint, "manifest": outcome.manifest,
                      "counts": outcome.counts, "metrics": outcome.metrics}, indent=2, default=str))
    return 0


def _memory_plan(config, device_name: str | None, *, always: bool) -> int | None:
    """Print the plan (always with --plan); 0 / 2 ends the job, None lets training go on."""
    from squeez_ray.train.devices import detect_device, named_device
    from squeez_ray.train.plan import plan_memory

    device, note = (named_device(device_name), "") if device_name else (detect_device(), "")
    if device is None:
        if not always:  # the driver has no GPU (e.g. a cluster head): the workers' cards are unknown here
            return None
        device = named_device("a100-80gb" if config.scaling.use_gpu else "cpu")
        note = " (no GPU here; --device names another)" if config.scaling.use_gpu else ""
    plan = plan_memory(config, device)
    if always or not plan.fits:
        print(plan.table() + note)
    if not plan.fits:
        print(f"error: this config needs about {plan.total / 2**30:.1f} GiB per worker on {device.name} "
              f"({device.memory_bytes / 2**30:.1f} GiB): lower train.max_tokens_per_batch (now {plan.tokens_per_batch}), "
              "turn on model.gradient_checkpointing, or use a larger card / ZeRO-3", file=sys.stderr)
        return 2
    return 0 if always else None


if __name__ == "__main__":
    sys.exit(main())
