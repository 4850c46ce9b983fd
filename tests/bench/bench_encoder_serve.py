"""The encoder behind Ray Serve: requests/s at concurrency 1 and 8, with and without request
batching, against calling the same runtime directly (prints; asserts nothing).

    RAY_AUTH_MODE=disabled python tests/bench/bench_encoder_serve.py [--model DIR] [--requests 48]

Starts its own local Ray (2 CPUs) and Serve on loopback, one encoder replica with one CPU and one
runtime thread (serve_configs/encoder_cpu.yaml's replica shape), and sends one output to prune per
request (the public cases' outputs around ``--lines`` lines, cycled). Prints the machine's load:
a shared machine skews every number here.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load() -> str:
    return "load %.1f %.1f %.1f" % os.getloadavg()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pick_outputs(data: str, lines: int, n: int) -> list[dict]:
    from squeez_ray.schema import read_examples

    cases = sorted(read_examples(data), key=lambda c: abs(c["tool_output"].count("\n") + 1 - lines))[:8]
    return [{"query": c["query"], "tool_output": c["tool_output"]} for c in (cases * (n // len(cases) + 1))[:n]]


def rate(fn, items: list[dict], concurrency: int) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(fn, items))
    return len(items) / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="encoder directory (default: the shipped model)")
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "eval" / "public_cases.jsonl"))
    parser.add_argument("--lines", type=int, default=300, help="outputs nearest this many lines")
    parser.add_argument("--requests", type=int, default=48)
    args = parser.parse_args(argv)

    import ray
    import requests
    from ray import serve

    from squeez_ray.infer.registry import build_pruner
    from squeez_ray.serve.app import build_app

    items = pick_outputs(args.data, args.lines, args.requests)
    print(f"machine: {os.cpu_count()} CPUs; {len(items)} requests of ~{args.lines} lines; {load()}")
    direct = build_pruner("encoder", model=args.model, engine_kwargs={"threads": 1})
    direct.prune(items[0]["query"], items[0]["tool_output"])
    direct_rps = rate(lambda it: direct.prune(it["query"], it["tool_output"]), items, 1)
    print(f"direct runtime, one call at a time: {direct_rps:.2f} req/s ({load()})", flush=True)

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"RAY_AUTH_MODE": "disabled"}})
    port = _free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    results = {}
    try:
        for max_batch in (8, 1):
            args_app = {"backend": "encoder", "pruner": {"engine_kwargs": {"threads": 1}},
                        "local_batching": {"max_batch_size": max_batch},
                        "ingress_deployment": {"num_replicas": 1, "ray_actor_options": {"num_cpus": 0}},
                        "pruner_deployment": {"num_replicas": 1, "max_ongoing_requests": 16,
                                              "ray_actor_options": {"num_cpus": 1}}}
            if args.model:
                args_app["model"] = str(Path(args.model).resolve())
            serve.run(build_app(args_app), name="bench", route_prefix="/")
            url = f"http://127.0.0.1:{port}/v1/prune"
            session = requests.Session()

            def call(item: dict) -> None:
                requests.post(url, json=item, timeout=300).raise_for_status()

            call(items[0])
            for concurrency in (1, 8):
                rps = rate(call, items, concurrency)
                results[(max_batch, concurrency)] = rps
                print(f"serve, max_batch_size={max_batch}, concurrency {concurrency}: {rps:.2f} req/s ({load()})",
                      flush=True)
            health = session.get(f"http://127.0.0.1:{port}/healthz", timeout=60).json()
            print(f"  batching seen by the replica: {health.get('batching')}")
            serve.delete("bench")
    finally:
        serve.shutdown()
        ray.shutdown()
    print(f"overhead of Serve at concurrency 1 (direct / served time per request): "
          f"{direct_rps / results[(8, 1)]:.2f}x")
    print(f"throughput, concurrency 8 vs 1 (batched): {results[(8, 8)] / results[(8, 1)]:.2f}x; "
          f"batched vs unbatched at concurrency 8: {results[(8, 8)] / results[(1, 8)]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
