"""LoRA fine-tune on Ray Train.

    python jobs/train.py --config jobs/configs/tiny_cpu.yaml [key=value ...]
    ray job submit --working-dir . -- python jobs/train.py --config jobs/configs/qwen35_2b_lora.yaml

Resubmitting with the same run.name and run.storage_path resumes from the latest checkpoint.
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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from squeez_ray.config import ConfigError, load_config
    from squeez_ray.schema import DataError
    from squeez_ray.train.config import TrainConfig
    from squeez_ray.train.data import TrainDataError
    from squeez_ray.train.run import TrainJobError, run_training

    try:
        config = load_config(TrainConfig, args.config, args.overrides)
        outcome = run_training(config, config_path=args.config)
    except (ConfigError, DataError, TrainJobError, TrainDataError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps({"run_dir": outcome.run_dir, "checkpoint": outcome.checkpoint, "manifest": outcome.manifest,
                      "counts": outcome.counts, "metrics": outcome.metrics}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
