"""LoRA fine-tune on Ray Train.

    python jobs/train.py --config jobs/configs/tiny_cpu.yaml [key=value ...]
    ray job submit --working-dir . -- python jobs/train.py --config jobs/configs/qwen35_2b_lora.yaml

Resubmitting with the same run.name and run.storage_path resumes from the latest checkpoint.
"""

from __future__ import annotations

import sys

from squeez_ray.runner import Outcome, job_parser, run_job
from squeez_ray.train.config import TrainConfig


def work(config: TrainConfig, args) -> Outcome:
    from squeez_ray.train.run import run_training

    outcome = run_training(config, config_path=args.config)
    return Outcome(summary={"run_dir": outcome.run_dir, "checkpoint": outcome.checkpoint,
                            "manifest": outcome.manifest, "counts": outcome.counts, "metrics": outcome.metrics},
                   manifest=outcome.manifest)


def main(argv: list[str] | None = None) -> int:
    parser = job_parser(__doc__, TrainConfig, config_required=True, config_help="YAML config (jobs/configs/*.yaml)",
                        overrides_example="train.max_steps=4 run.name=try2")
    return run_job("train", work, argv, parser=parser, config_cls=TrainConfig)


if __name__ == "__main__":
    sys.exit(main())
