"""Build the encoder's training set from real PyPI packages and real tool runs (rule teacher labels).

    python jobs/build_encoder_data.py --config jobs/configs/encoder_data.yaml
    python jobs/build_encoder_data.py --config jobs/configs/encoder_data.yaml output_dir=/tmp/d min_packages=3
    ray job submit --working-dir . -- python jobs/build_encoder_data.py --config jobs/configs/encoder_data.yaml

Writes OUTPUT/{train,dev,test}.parquet (the project schema), labelled.jsonl, manifest.json, stats.md.
Downloads, unpacked sources and per-package observations are cached in cache_dir: a rerun resumes.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="YAML (fields of squeez_ray.encoder.corpus.EncoderDataConfig)")
    parser.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. min_packages=3")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from squeez_ray.config import ConfigError, load_config
    from squeez_ray.encoder.corpus import EncoderDataConfig, build_encoder_data
    from squeez_ray.schema import DataError

    try:
        config = load_config(EncoderDataConfig, args.config, args.overrides)
        manifest = build_encoder_data(config)
    except (ConfigError, DataError, RuntimeError) as error:
        print(f"build_encoder_data: {error}", file=sys.stderr)
        return 2
    counts = manifest["counts"]
    print(json.dumps({"train": counts["train"], "dev": counts["dev"], "test": counts["test"],
                      "packages": len(manifest["packages"]), "packages_failed": manifest["packages_failed"],
                      "repos": manifest["repos"], "tool_types": manifest["tool_types"],
                      "seconds": manifest["seconds_total"]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
