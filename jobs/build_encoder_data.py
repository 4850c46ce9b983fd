"""Build the encoder's training set from real PyPI packages and real tool runs (rule teacher labels).

    python jobs/build_encoder_data.py --config jobs/configs/encoder_data.yaml
    python jobs/build_encoder_data.py --config jobs/configs/encoder_data.yaml output_dir=/tmp/d min_packages=3
    ray job submit --working-dir . -- python jobs/build_encoder_data.py --config jobs/configs/encoder_data.yaml

Writes OUTPUT/{train,dev,test}.parquet (the project schema), labelled.jsonl, manifest.json, stats.md.
Downloads, unpacked sources and per-package observations are cached in cache_dir: a rerun resumes.
"""

from __future__ import annotations

import sys

from squeez_ray.dataset.encoder_corpus import EncoderDataConfig, build_encoder_data
from squeez_ray.runner import Outcome, job_parser, run_job


def work(config: EncoderDataConfig, args) -> Outcome:
    manifest = build_encoder_data(config)
    counts = manifest["counts"]
    return Outcome(summary={"train": counts["train"], "dev": counts["dev"], "test": counts["test"],
                            "packages": len(manifest["packages"]), "packages_failed": manifest["packages_failed"],
                            "repos": manifest["repos"], "tool_types": manifest["tool_types"],
                            "seconds": manifest["seconds_total"]},
                   manifest=f"{config.output_dir}/manifest.json")


def main(argv: list[str] | None = None) -> int:
    parser = job_parser(__doc__, EncoderDataConfig, config_required=True,
                        config_help="YAML (fields of squeez_ray.dataset.encoder_corpus.EncoderDataConfig)",
                        overrides_example="min_packages=3")
    return run_job("build_encoder_data", work, argv, parser=parser, config_cls=EncoderDataConfig,
                   errors=(RuntimeError,))


if __name__ == "__main__":
    sys.exit(main())
