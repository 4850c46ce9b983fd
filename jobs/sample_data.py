"""Build a small REAL labelled dataset from local sources only (no network, no model, no LLM).

    python jobs/sample_data.py --out data/sample
    python jobs/sample_data.py --out data/sample packages='[click, idna]' scratch_projects=6 budget.read_file=12
    ray job submit --working-dir . -- python jobs/sample_data.py --out /tmp/sample

Sources: this checkout (files, git history), installed packages' sources, and scratch projects
with real bugs; real tool runs (pytest, python, ruff, pip, git, grep, cat, ls) labelled by the rule
teacher; then QA, group splits and negatives. Writes DIR/{train,dev,test}.parquet, manifest.json,
stats.md / stats.json, and the intermediate observations.jsonl / labelled.jsonl. DIR works as a training
train_path (train_split=train, eval_split=dev).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--config", help="optional YAML (fields of squeez_ray.dataset.sample.SampleConfig)")
    parser.add_argument("--overwrite", action="store_true", help="rebuild even if DIR already holds a sample")
    parser.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. scratch_projects=6")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from squeez_ray.config import ConfigError, load_config
    from squeez_ray.dataset.sample import SampleConfig, build_sample
    from squeez_ray.schema import DataError

    try:
        overrides = [*args.overrides, f"output_dir={args.out}"] + (["overwrite=true"] if args.overwrite else [])
        config = load_config(SampleConfig, args.config, overrides)
        manifest = build_sample(config)
    except (ConfigError, DataError, FileNotFoundError) as error:
        print(f"sample_data: {error}", file=sys.stderr)
        return 2
    counts = manifest["counts"]
    print(json.dumps({"train": counts["train"], "dev": counts["dev"], "test": counts["test"],
                      "tool_types": manifest.get("tool_types"), "dropped": manifest["dropped"],
                      "seconds": manifest.get("seconds_total")}, indent=2))
    print(f"wrote {args.out}/{{train,dev,test}}.parquet, manifest.json, stats.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
