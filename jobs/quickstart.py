"""The whole pipeline on an embedded local Ray, in minutes on a laptop (2 cores, no GPU):

    python jobs/quickstart.py                                   # jobs/configs/quickstart_cpu.yaml
    python jobs/quickstart.py --config jobs/configs/quickstart_gpu.yaml data_dir=DATA   # the real recipe

sample data -> LoRA on Ray Train -> merge -> Ray Serve (vLLM) -> prune a real tool output through
the endpoint and `squeez` -> bulk evaluation of the served model and the four baselines.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="jobs/configs/quickstart_cpu.yaml", help="quickstart YAML")
    parser.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. out_dir=/tmp/qs port=8001")
    args = parser.parse_args(argv)

    from squeez_ray.config import ConfigError, load_config
    from squeez_ray.quickstart import QuickstartConfig, QuickstartError, run_quickstart

    try:
        run_quickstart(load_config(QuickstartConfig, args.config, args.overrides))
    except (ConfigError, QuickstartError) as error:
        print(f"quickstart: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # vLLM starts worker processes: the guard is required
    sys.exit(main())
