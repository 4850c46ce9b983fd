"""Training throughput of the tiny CPU config with 1 and 2 Ray Train workers (prints tokens/s and the ratio).

    python tests/bench/bench_train.py [--steps 20]

Each worker gets one CPU (one torch thread), so the ratio is data-parallel scaling on this machine,
gradient all-reduce over gloo included. Tokens are non-padding input tokens summed over workers,
divided by the Trainer's train_runtime (which includes data loading from the Ray Data shard).
For the GPU number at 20k tokens, run jobs/configs/bench_qwen35_2b_random.yaml on a GPU machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(workers: int, steps: int, data: Path, storage: Path) -> float:
    from squeez_ray.config import load_config
    from squeez_ray.train.config import TrainConfig
    from squeez_ray.train.run import run_training

    config = load_config(TrainConfig, REPO / "jobs/configs/tiny_cpu.yaml", {
        "data.train_path": str(data), "run.storage_path": str(storage), "run.name": f"bench-{workers}w",
        "scaling.num_workers": workers, "scaling.cpus_per_worker": 1, "train.max_steps": steps,
        "train.save_steps": steps, "train.logging_steps": 5, "data.repeat": 4, "run.max_failures": 0})
    metrics = run_training(config).metrics
    return metrics["num_input_tokens_seen"] / metrics["train_runtime"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    for key, value in {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "HF_HUB_OFFLINE": "1",
                       "TOKENIZERS_PARALLELISM": "false"}.items():
        os.environ.setdefault(key, value)
    import ray

    from squeez_ray.train.synthetic import synthetic_rows, write_jsonl

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    with tempfile.TemporaryDirectory() as tmp:
        data = write_jsonl(synthetic_rows(64, seed=3), Path(tmp) / "labelled.jsonl")
        one = run(1, args.steps, data, Path(tmp) / "runs")
        two = run(2, args.steps, data, Path(tmp) / "runs")
    ray.shutdown()
    print(f"tiny_cpu training, {args.steps} optimizer steps of {4} sequences per worker")
    print(f"  1 worker : {one:8.0f} tokens/s")
    print(f"  2 workers: {two:8.0f} tokens/s")
    print(f"  ratio 2/1: {two / one:.2f}")


if __name__ == "__main__":
    main()
