"""Write synthetic multi-ecosystem tool outputs with a teacher LLM, then label them like real ones.

    python jobs/synthesize.py --config jobs/configs/synthesize.yaml output_dir=data/synthetic \\
        teacher.http.url=http://HOST:8000/v1
    ray job submit --working-dir . -- python jobs/synthesize.py --config jobs/configs/synthesize.yaml ...

Families live in jobs/configs/synth_families.yaml. Rerunning resumes (written ids are skipped).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="YAML config (jobs/configs/synthesize.yaml)")
    parser.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. per_family=5")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from squeez_ray.config import ConfigError, load_config
    from squeez_ray.dataset.synthesize import SynthError, SynthesizeConfig, synthesize
    from squeez_ray.schema import DataError

    try:
        config = load_config(SynthesizeConfig, args.config, args.overrides)
        manifest = synthesize(config)
    except (ConfigError, DataError, SynthError) as error:
        print(f"synthesize: {error}", file=sys.stderr)
        return 2
    print(json.dumps({"counts": manifest["counts"], "dropped": manifest["dropped"]}, indent=2))
    print(f"labelled parts: {config.output_dir}/labelled/; manifest: {config.output_dir}/manifest.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
