"""The real Qwen 3.5 2B architecture (random weights) trained through jobs/train.py on CPU: time and peak vs plan.

    python tests/bench/bench_train_2b_cpu.py [--tokens 2048] [--steps 2] [--work runs/bench-2b-cpu]

bf16 weights (3.8 GB; fp32 would be 7.5 GB), LoRA r16 all-linear, gradient checkpointing, one CPU
worker, the response-only loss. Prints one JSON line: loss (finite), whether every LoRA B matrix
moved off zero, wall time, the worker's peak RSS and the plan's total for the same config on "cpu",
and their ratio. Minutes per step on a laptop: a benchmark, not a CI test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def overrides(work: Path, tokens: int, steps: int) -> list[str]:
    return [f"data.train_path={work / 'data.jsonl'}", f"run.storage_path={work / 'runs'}", "run.name=bench-2b-cpu",
            f"data.max_seq_length={tokens}", f"train.max_tokens_per_batch={tokens}", "train.per_device_batch_size=1",
            f"train.max_steps={steps}", f"train.save_steps={steps}", "train.logging_steps=1", "train.bf16=false",
            "train.use_cpu=true", "scaling.use_gpu=false", "scaling.cpus_per_worker=1", "data.tokenize_num_cpus=0.5",
            "model.dtype=bfloat16", "model.gradient_checkpointing=true",
            "train.warmup_ratio=0"]  # with warm-up, step 1 runs at learning rate 0 and LoRA B stays zero


def lora_moved(checkpoint: str) -> bool:
    from safetensors.torch import load_file

    tensors = load_file(str(Path(checkpoint) / "adapter_model.safetensors"))
    b = [t for name, t in tensors.items() if "lora_B" in name]
    return bool(b) and all(float(t.float().abs().sum()) > 0 for t in b)


def bench(tokens: int, steps: int, work: Path) -> dict:
    from squeez_ray.train.synthetic import synthetic_rows, write_jsonl

    work.mkdir(parents=True, exist_ok=True)
    # Long enough that every example is cut to `tokens` (the filler is ~6 tokens a line with the tiny tokenizer).
    write_jsonl(synthetic_rows(8, filler_lines=max(8, tokens // 4)), work / "data.jsonl")
    config = str(REPO / "jobs/configs/bench_qwen35_2b_random.yaml")
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    args = overrides(work, tokens, steps)
    plan = subprocess.run([sys.executable, str(REPO / "jobs/train.py"), "--config", config, "--plan", "--device", "cpu",
                           *args], env=env, capture_output=True, text=True)
    planned = next(float(line.split()[1]) for line in plan.stdout.splitlines() if line.strip().startswith("total"))
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(REPO / "jobs/train.py"), "--config", config, *args], env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"training failed ({done.returncode}):\n{done.stderr[-4000:]}")
    text = done.stdout  # Ray's log lines come first; the job's JSON summary is the last block, "{" on its own line
    result = json.loads(text[text.rfind("\n{\n") + 1 if "\n{\n" in text else text.index("{\n"):])
    metrics = result["metrics"]
    peak = metrics.get("peak_memory_bytes", 0) / 2 ** 30
    return {"tokens": tokens, "steps": steps, "loss": metrics.get("loss"),
            "loss_finite": metrics.get("loss") is not None and math.isfinite(metrics["loss"]),
            "lora_moved": lora_moved(result["checkpoint"]), "wall_s": round(wall, 1),
            "tokens_per_s": metrics.get("tokens_per_s"), "peak_rss_gib": round(peak, 2),
            "plan_gib": planned, "plan_over_peak": round(planned / peak, 2) if peak else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--work", default=str(REPO / "runs/bench-2b-cpu"))
    args = parser.parse_args()
    print(json.dumps(bench(args.tokens, args.steps, Path(args.work))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
