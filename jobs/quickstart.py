"""The whole pipeline on an embedded local Ray, in minutes on a laptop (2 cores, no GPU):

    python jobs/quickstart.py                                   # jobs/configs/quickstart_cpu.yaml
    python jobs/quickstart.py --config jobs/configs/quickstart_gpu.yaml data_dir=DATA   # the real recipe

sample data -> LoRA on Ray Train -> merge -> Ray Serve (vLLM) -> prune a real tool output through
the endpoint and `squeez` -> bulk evaluation of the served model and the four baselines.
"""

from __future__ import annotations

import sys

from squeez_ray.quickstart import QuickstartConfig, run_quickstart
from squeez_ray.runner import Outcome, job_parser, run_job


def work(config: QuickstartConfig, args) -> Outcome:
    run_quickstart(config)
    return Outcome()


def main(argv: list[str] | None = None) -> int:
    parser = job_parser(__doc__, QuickstartConfig, config_default="jobs/configs/quickstart_cpu.yaml",
                        config_help="quickstart YAML", overrides_example="out_dir=/tmp/qs port=8001")
    return run_job("quickstart", work, argv, parser=parser, config_cls=QuickstartConfig, logs=False)


if __name__ == "__main__":  # vLLM starts worker processes: the guard is required
    sys.exit(main())
