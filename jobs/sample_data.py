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

import sys

from squeez_ray.dataset.sample import SampleConfig, build_sample
from squeez_ray.runner import Outcome, job_parser, run_job


def work(config: SampleConfig, args) -> Outcome:
    manifest = build_sample(config)
    counts = manifest["counts"]
    return Outcome(summary={"train": counts["train"], "dev": counts["dev"], "test": counts["test"],
                            "tool_types": manifest.get("tool_types"), "dropped": manifest["dropped"],
                            "seconds": manifest.get("seconds_total")},
                   notes=[f"wrote {args.out}/{{train,dev,test}}.parquet, manifest.json, stats.md"],
                   manifest=f"{args.out}/manifest.json")


def main(argv: list[str] | None = None) -> int:
    parser = job_parser(__doc__, SampleConfig,
                        config_help="optional YAML (fields of squeez_ray.dataset.sample.SampleConfig)",
                        overrides_example="scratch_projects=6")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--overwrite", action="store_true", help="rebuild even if DIR already holds a sample")
    return run_job("sample_data", work, argv, parser=parser, config_cls=SampleConfig,
                   config_overrides=lambda a: [f"output_dir={a.out}"] + (["overwrite=true"] if a.overwrite else []),
                   errors=(FileNotFoundError,))


if __name__ == "__main__":
    sys.exit(main())
