"""Label raw tool observations with a teacher: a focused query, then the smallest evidence spans.

    python jobs/label.py --config jobs/configs/label.yaml observations=data/raw/observations \\
        instances=data/instances.jsonl output_dir=data/labelled teacher.http.url=http://HOST:8000/v1
    python jobs/label.py --config jobs/configs/label.yaml ... teacher.engine=rules      # no LLM
    ray job submit --working-dir . -- python jobs/label.py --config jobs/configs/label.yaml ...

The HTTP teacher's key comes from $SQUEEZ_TEACHER_API_KEY (teacher.http.api_key_env). Rerunning the
same command resumes; rows lost to the endpoint (budget, retries) are tried again.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="YAML config (jobs/configs/label.yaml)")
    parser.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. teacher.engine=rules")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from squeez_ray.config import ConfigError, load_config
    from squeez_ray.label.job import LabelConfig, LabelJobError, run_label
    from squeez_ray.schema import DataError

    try:
        config = load_config(LabelConfig, args.config, args.overrides)
        manifest = run_label(config)
    except (ConfigError, DataError, LabelJobError) as error:
        print(f"label: {error}", file=sys.stderr)
        return 2
    print(json.dumps({"counts": manifest["counts"], "dropped": manifest["dropped"]}, indent=2))
    print(f"labelled parts: {config.output_dir}/labelled/; manifest: {config.output_dir}/manifest.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
