"""Build train / dev / test Parquet from labelled examples: QA, group splits, negatives, statistics.

    python jobs/build_dataset.py --config jobs/configs/build_dataset.yaml \\
        inputs='[data/labelled/labelled, data/synthetic/labelled]' output_dir=data/dataset
    ray job submit --working-dir . -- python jobs/build_dataset.py --config jobs/configs/build_dataset.yaml ...

Rerunning with unchanged inputs and config does nothing (overwrite=true rebuilds).
"""

from __future__ import annotations

import sys

from squeez_ray.dataset.build import BuildConfig, build_dataset
from squeez_ray.runner import Outcome, job_parser, run_job


def work(config: BuildConfig, args) -> Outcome:
    manifest = build_dataset(config)
    counts = manifest["counts"]
    return Outcome(
        summary={k: counts[k] for k in ("input_examples", "after_qa", "train", "dev", "test", "negatives_added")},
        notes=[f"dropped: {manifest['dropped']}; table: {config.output_dir}/stats.md"],
        manifest=f"{config.output_dir}/manifest.json")


def main(argv: list[str] | None = None) -> int:
    parser = job_parser(__doc__, BuildConfig, config_help="YAML config (jobs/configs/build_dataset.yaml)",
                        overrides_example="seed=1 qa.min_output_lines=8")
    return run_job("build_dataset", work, argv, parser=parser, config_cls=BuildConfig)


if __name__ == "__main__":
    sys.exit(main())
