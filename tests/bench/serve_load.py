"""Closed-loop load on the pruning service, and the Serve overhead ratio.

    flock /tmp/squeez-heavy.lock .venv/bin/python tests/bench/serve_load.py [--model DIR]

1. Direct: the project's ``vllm`` backend (offline ``vllm.LLM``, same engine options) prunes the
   inputs one at a time in this process: the latency of the engine without Serve.
2. Service: the Serve app of ``serve_configs/pruner_cpu.yaml``'s shape (ray.serve.llm replica +
   pruning API) on loopback; closed-loop clients at each concurrency send ``POST /v1/prune`` back to
   back. Printed per level: requests/s, p50/p99 latency, 503s and other errors.
3. Serve overhead = p50 through the service at concurrency 1 / p50 direct, same inputs (goal <= 1.10).

Without ``--model`` a tiny random Qwen3 is built (random weights never stop early, so every reply
is exactly ``--max-new-tokens`` tokens: the same work direct and through Serve). Prints a table;
asserts nothing (speed is reported, never tested).
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def make_inputs(n: int, lines: int) -> list[tuple[str, str]]:
    out = []
    for k in range(n):
        rows = [f"tests/test_mod_{k}_{i}.py::test_case_{i} PASSED [{i % 100:3d}%]" for i in range(1, lines + 1)]
        rows[(k * 7) % lines] = f"tests/test_mod_{k}.py::test_case_{k} FAILED - AssertionError: expected {k}"
        out.append((f"which test failed in module {k}", "\n".join(rows)))
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def direct_latencies(model: str, engine_kwargs: dict, max_new_tokens: int, inputs) -> list[float]:
    from squeez_ray.infer.registry import BackendOptions, build_pruner

    pruner = build_pruner("vllm", BackendOptions(model=model, engine_kwargs=engine_kwargs, max_new_tokens=max_new_tokens))
    try:
        pruner.prune(*inputs[0], fail_open=False)  # warm-up
        latencies = []
        for query, output in inputs:
            started = time.perf_counter()
            result = pruner.prune(query, output, fail_open=False)
            latencies.append((time.perf_counter() - started) * 1000)
            assert result.pruned, result.reason
        return latencies
    finally:
        pruner.close()


def closed_loop(url: str, inputs, concurrency: int, total: int) -> dict:
    import requests

    lock = threading.Lock()
    next_index = [0]
    latencies: list[float] = []
    codes: dict[int, int] = {}

    def worker() -> None:
        session = requests.Session()
        while True:
            with lock:
                if next_index[0] >= total:
                    return
                i = next_index[0]
                next_index[0] += 1
            query, output = inputs[i % len(inputs)]
            started = time.perf_counter()
            try:
                response = session.post(url, json={"query": query, "tool_output": output}, timeout=600)
                code = response.status_code if response.status_code != 200 or response.json()["pruned"] else -1
            except requests.RequestException:
                code = 0
            elapsed = (time.perf_counter() - started) * 1000
            with lock:
                codes[code] = codes.get(code, 0) + 1
                if code == 200:
                    latencies.append(elapsed)

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    ok = codes.get(200, 0)
    return {"concurrency": concurrency, "requests": total, "ok": ok, "rejected_503": codes.get(503, 0),
            "unpruned": codes.get(-1, 0), "errors": total - ok - codes.get(503, 0) - codes.get(-1, 0),
            "rps": ok / wall, "p50": percentile(latencies, 0.5) if latencies else float("nan"),
            "p99": percentile(latencies, 0.99) if latencies else float("nan")}


def serve_levels(model: str, engine_kwargs: dict, max_new_tokens: int, inputs, levels: list[int],
                 per_level: int) -> list[dict]:
    import ray
    from ray import serve

    from squeez_ray.serve.app import build_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"RAY_AUTH_MODE": "disabled", "VLLM_CPU_KVCACHE_SPACE": "1",
                                       "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}})
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(build_app({
            "backend": "vllm", "model": model, "model_id": "bench", "engine_kwargs": engine_kwargs,
            "placement_group_config": {"bundles": [{"CPU": 1}]},
            "model_deployment": {"autoscaling_config": {"min_replicas": 1, "max_replicas": 1},
                                 "max_ongoing_requests": 16, "max_queued_requests": 64,
                                 "ray_actor_options": {"num_cpus": 0}},
            "ingress_deployment": {"ray_actor_options": {"num_cpus": 0}},
            "pruner": {"max_new_tokens": max_new_tokens},
            "limits": {"request_timeout_s": 600}}), name="bench", route_prefix="/")
        url = f"http://127.0.0.1:{port}/v1/prune"
        closed_loop(url, inputs, 1, 2)  # warm-up
        return [closed_loop(url, inputs, c, max(per_level, 2 * c)) for c in levels]
    finally:
        serve.shutdown()
        ray.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="checkpoint directory (default: build a tiny random Qwen3)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--requests", type=int, default=32, help="requests per concurrency level (at least 2x it)")
    parser.add_argument("--direct-requests", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--lines", type=int, default=40, help="lines per tool output")
    args = parser.parse_args(argv)

    tmp = tempfile.TemporaryDirectory(prefix="serve-bench-")
    model = args.model
    if model is None:
        from squeez_ray.train.tiny import build_tiny_qwen3

        model = str(build_tiny_qwen3(Path(tmp.name) / "tiny"))
    engine_kwargs = {"max_model_len": 2048, "dtype": "float32", "enforce_eager": True, "max_num_seqs": 16}
    inputs = make_inputs(max(args.direct_requests, 16), args.lines)

    direct = direct_latencies(model, engine_kwargs, args.max_new_tokens, inputs[:args.direct_requests])
    levels = serve_levels(model, engine_kwargs, args.max_new_tokens, inputs, args.concurrency, args.requests)

    print(f"\nmachine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} CPUs visible, "
          f"Python {platform.python_version()}, model {Path(model).name}, {args.lines}-line outputs, "
          f"{args.max_new_tokens} new tokens per reply")
    print("| concurrency | requests | ok | 503 | unpruned | other errors | requests/s | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in levels:
        print(f"| {row['concurrency']} | {row['requests']} | {row['ok']} | {row['rejected_503']} | {row['unpruned']} "
              f"| {row['errors']} | {row['rps']:.2f} | {row['p50']:.0f} | {row['p99']:.0f} |")
    direct_p50 = statistics.median(direct)
    served_p50 = next((r["p50"] for r in levels if r["concurrency"] == 1), float("nan"))
    print(f"\ndirect engine (same inputs, in-process vllm backend, concurrency 1): p50 {direct_p50:.0f} ms, "
          f"p99 {percentile(direct, 0.99):.0f} ms")
    print(f"Serve overhead ratio at concurrency 1 = {served_p50:.0f} / {direct_p50:.0f} = "
          f"{served_p50 / direct_p50:.3f} (goal <= 1.10)")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
