"""Collect raw tool observations: real tools, sandboxed, over repository snapshots, on Ray Data.

    python jobs/collect.py --config jobs/configs/collect.yaml instances=data/instances.jsonl \\
        mirrors=/data/mirrors output_dir=data/raw
    ray job submit --working-dir . -- python jobs/collect.py --config jobs/configs/collect.yaml \\
        instances=/shared/swe/instances.parquet mirrors=/shared/mirrors output_dir=/shared/raw workers=16

Rerun the same command after an interruption: calls already written are skipped. See docs/DATA.md.
"""

from __future__ import annotations

import argparse
import json
import sys

from squeez_ray.collect.pipeline import CollectConfig, CollectError, collect
from squeez_ray.config import ConfigError, load_config
from squeez_ray.schema import DataError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="YAML config (jobs/configs/collect.yaml)")
    parser.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. workers=8 seed=1")
    args = parser.parse_args(argv)
    try:
        config = load_config(CollectConfig, args.config, args.overrides)
        manifest = collect(config)
    except (ConfigError, DataError, CollectError) as error:
        print(f"collect: {error}", file=sys.stderr)
        return 2
    counts = manifest["counts"]
    print(json.dumps({k: counts[k] for k in counts if k != "by_tool_type"}, indent=2))
    print(f"manifest: {config.output_dir}/manifest.json ({manifest['failure_count']} failure(s) listed there)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
