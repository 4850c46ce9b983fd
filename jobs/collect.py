"""Collect raw tool observations: real tools, sandboxed, over repository snapshots, on Ray Data.

    python jobs/collect.py --config jobs/configs/collect.yaml instances=data/instances.jsonl \\
        mirrors=/data/mirrors output_dir=data/raw
    ray job submit --working-dir . -- python jobs/collect.py --config jobs/configs/collect.yaml \\
        instances=/shared/swe/instances.parquet mirrors=/shared/mirrors output_dir=/shared/raw workers=16

Rerun the same command after an interruption: calls already written are skipped. See docs/DATA.md.
"""

from __future__ import annotations

import sys

from squeez_ray.collect.pipeline import CollectConfig, collect
from squeez_ray.runner import Outcome, job_parser, run_job


def work(config: CollectConfig, args) -> Outcome:
    manifest = collect(config)
    counts = manifest["counts"]
    return Outcome(summary={k: counts[k] for k in counts if k != "by_tool_type"},
                   notes=[f"{manifest['failure_count']} failure(s) listed in the manifest"],
                   manifest=f"{config.output_dir}/manifest.json")


def main(argv: list[str] | None = None) -> int:
    parser = job_parser(__doc__, CollectConfig, config_help="YAML config (jobs/configs/collect.yaml)",
                        overrides_example="workers=8 seed=1")
    return run_job("collect", work, argv, parser=parser, config_cls=CollectConfig, logs=False)


if __name__ == "__main__":
    sys.exit(main())
