"""Build train / dev / test Parquet from labelled examples: QA, group splits, negatives, statistics.

    python jobs/build_dataset.py --config jobs/configs/build_dataset.yaml \\
        inputs='[data/labelled/labelled, data/synthetic/labelled]' output_dir=data/dataset
    ray job submit --working-dir . -- python jobs/build_dataset.py --config jobs/configs/build_dataset.yaml ...

Rerunning with unchanged inputs and config does nothing (overwrite=true rebuilds).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="YAML config (jobs/configs/build_dataset.yaml)")
    parser.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. seed=1 qa.min_output_lines=8")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from squeez_ray.config import ConfigError, load_config
    from squeez_ray.dataset.build import BuildConfig, build_dataset
    from squeez_ray.schema import DataError

    try:
        config = load_config(BuildConfig, args.config, args.overrides)
        manifest = build_dataset(config)
    except (ConfigError, DataError) as error:
        print(f"build_dataset: {error}", file=sys.stderr)
        return 2
    counts = manifest["counts"]
    print(json.dumps({k: counts[k] for k in ("input_examples", "after_qa", "train", "dev", "test", "negatives_added")},
                     indent=2))
    print(f"dropped: {manifest['dropped']}; manifest: {config.output_dir}/manifest.json; table: {config.output_dir}/stats.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
