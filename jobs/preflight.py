"""Pre-flight for a training config: check, on the nodes that will run its workers, what would fail there.

    python jobs/preflight.py --config jobs/configs/tiny_cpu.yaml
    ray job submit --working-dir . -- python jobs/preflight.py --config jobs/configs/qwen35_2b_lora.yaml \
        data.train_path=/mnt/shared/data/squeez run.storage_path=/mnt/shared/runs scaling.accelerator_type=H100

Takes the same config and overrides as jobs/train.py. Reserves the workers' placement group (so the
autoscaler starts the same nodes) and checks on each: Python and package versions against the
constraints (constraints-gpu.txt for GPU configs, constraints.txt otherwise, or --constraints), the
Qwen 3.5 kernels importing and running a tiny op, the memory plan against the real card, the run's
storage visible from every node, the base model and the data. One line per problem; exit 2 if any.
"""

from __future__ import annotations

import sys
from pathlib import Path

from squeez_ray.runner import JobError, Outcome, job_parser, run_job
from squeez_ray.train.config import TrainConfig

REPO = Path(__file__).resolve().parents[1]


def work(config: TrainConfig, args) -> Outcome:
    from squeez_ray.ray_init import init_ray
    from squeez_ray.train.preflight import run_preflight

    gpu = config.scaling.use_gpu and not config.train.use_cpu
    constraints = args.constraints or str(REPO / ("constraints-gpu.txt" if gpu else "constraints.txt"))
    init_ray()
    problems = run_preflight(config, constraints=constraints, timeout_s=args.timeout)
    for line in problems:
        print(f"preflight: {line}", file=sys.stderr, flush=True)
    if problems:
        raise JobError(f"{len(problems)} problem(s) above; fix them before training")
    return Outcome(notes=[f"preflight: ok on the nodes of {config.scaling.num_workers} worker(s) "
                          f"(versions per {Path(constraints).name}, storage, model, data, memory plan)"])


def main(argv: list[str] | None = None) -> int:
    parser = job_parser(__doc__, TrainConfig, config_required=True, config_help="the training YAML (jobs/configs/*.yaml)",
                        overrides_example="scaling.accelerator_type=H100")
    parser.add_argument("--constraints", help="constraints file to compare versions with (default: by the config)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the workers' nodes")
    return run_job("preflight", work, argv, parser=parser, config_cls=TrainConfig)


if __name__ == "__main__":
    sys.exit(main())
