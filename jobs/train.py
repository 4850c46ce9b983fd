"""LoRA fine-tune on Ray Train.

    python jobs/train.py --config jobs/configs/tiny_cpu.yaml [key=value ...]
    python jobs/train.py --config jobs/configs/qwen35_2b_lora.yaml --plan [--device a100-80gb]
    ray job submit --working-dir . -- python jobs/train.py --config jobs/configs/qwen35_2b_lora.yaml

Resubmitting with the same run.name and run.storage_path resumes from the latest checkpoint.
--plan prints the memory plan of one worker on the card --device names, the GPU found here, the card
scaling.accelerator_type declares, or (none of these) an 80 GB A100; exit code 2 when it does not fit.
Training checks the same plan before Ray starts when one of the first three is known, and again on the
workers' real card before any step (squeez_ray.train.fit_check): a submit from a GPU-less head is checked too.
"""

from __future__ import annotations

import sys

from squeez_ray.runner import Outcome, job_parser, run_job
from squeez_ray.train.config import TrainConfig


def work(config: TrainConfig, args) -> Outcome:
    if args.plan or args.device or config.scaling.use_gpu:
        from squeez_ray.train.fit_check import plan_on_driver

        if plan_on_driver(config, args.device, always=args.plan):
            return Outcome()  # --plan: the plan was the job
    from squeez_ray.train.run import run_training

    outcome = run_training(config, config_path=args.config)
    return Outcome(summary={"run_dir": outcome.run_dir, "checkpoint": outcome.checkpoint,
                            "manifest": outcome.manifest, "counts": outcome.counts, "metrics": outcome.metrics},
                   manifest=outcome.manifest)


def main(argv: list[str] | None = None) -> int:
    from squeez_ray.train.devices import UnknownDevice
    from squeez_ray.train.fit_check import DoesNotFit
    from squeez_ray.train.memory_plan import PlanError

    parser = job_parser(__doc__, TrainConfig, config_required=True, config_help="YAML config (jobs/configs/*.yaml)",
                        overrides_example="train.max_steps=4 run.name=try2")
    parser.add_argument("--plan", action="store_true", help="print the memory plan and exit (2: does not fit)")
    parser.add_argument("--device", help="plan for this card (a100-80gb, h100-80gb, h200, a100-40gb, l40s, l4, a10g, cpu)")
    return run_job("train", work, argv, parser=parser, config_cls=TrainConfig, errors=(PlanError, UnknownDevice, DoesNotFit))


if __name__ == "__main__":
    sys.exit(main())
