"""One scorer everywhere (issue 36 item 7): the shipped encoder called the CLI's way (one pruner, one output
at a time, as the warm process does), through Ray Serve's encoder deployment, and through bulk evaluation
(Ray Data actors), each before (``engine_kwargs: shortlist_tokens: 0``: every line scored) and after (the
shipped shortlist), in one run. Prints per-request ms and lines/s; asserts nothing.

    flock /tmp/team/ray.lock env RAY_AUTH_MODE=disabled .venv/bin/python tests/bench/bench_same_scorer.py [--n 16]

All three build their pruner with ``infer.registry.build_pruner("encoder", ...)`` (Serve: serve/local_pruning.py;
bulk: evaluate/bulk.py SystemWorker; re-prune: jobs/reprune.py via the same registry), so the ``engine_kwargs``
given here reach the same ScoringPruner in each. Starts one local Ray (2 CPUs) and Serve on loopback.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VARIANTS = (("before: every line", {"shortlist_tokens": 0}), ("after: shipped shortlist", {}))


def load() -> str:
    return "load %.1f %.1f %.1f" % os.getloadavg()


def pick_cases(data: str, lines: int, n: int) -> list[dict]:
    from squeez_ray.schema import read_examples

    cases = sorted(read_examples(data), key=lambda c: abs(c["tool_output"].count("\n") + 1 - lines))
    return cases[:n]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "eval" / "public_cases.jsonl"))
    parser.add_argument("--lines", type=int, default=500, help="outputs nearest this many lines")
    parser.add_argument("--n", type=int, default=8, help="outputs per path and variant")
    args = parser.parse_args(argv)

    import ray
    import requests
    from ray import serve

    from squeez_ray.evaluate.bulk import BulkSettings, evaluate_bulk
    from squeez_ray.evaluate.local import SystemSpec
    from squeez_ray.infer.registry import BackendOptions, build_pruner
    from squeez_ray.serve.app import build_app

    cases = pick_cases(args.data, args.lines, args.n)
    n_lines = sum(c["tool_output"].count("\n") + 1 for c in cases)
    print(f"{os.cpu_count()} CPUs; {len(cases)} outputs, {n_lines} lines (median "
          f"{sorted(c['tool_output'].count(chr(10)) + 1 for c in cases)[len(cases) // 2]}); {load()}", flush=True)
    rows: list[tuple[str, str, float, str]] = []

    def record(path: str, variant: str, seconds: float) -> None:
        rows.append((path, variant, seconds, load()))
        print(f"{path:>6} {variant:>26}: {1000 * seconds / len(cases):8.0f} ms/request "
              f"{n_lines / seconds:8.0f} lines/s ({load()})", flush=True)

    for variant, kwargs in VARIANTS:
        pruner = build_pruner("encoder", engine_kwargs={"threads": 1, **kwargs})
        pruner.prune(cases[0]["query"], cases[0]["tool_output"])  # warm, as the warm process is
        started = time.perf_counter()
        for c in cases:
            pruner.prune(c["query"], c["tool_output"])
        record("cli", variant, time.perf_counter() - started)

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"RAY_AUTH_MODE": "disabled"}})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    try:
        for variant, kwargs in VARIANTS:
            app = {"backend": "encoder", "pruner": {"engine_kwargs": {"threads": 1, **kwargs}},
                   "ingress_deployment": {"num_replicas": 1, "ray_actor_options": {"num_cpus": 0}},
                   "pruner_deployment": {"num_replicas": 1, "ray_actor_options": {"num_cpus": 1}}}
            serve.run(build_app(app), name="bench", route_prefix="/")
            url = f"http://127.0.0.1:{port}/v1/prune"
            requests.post(url, json={"query": cases[0]["query"], "tool_output": cases[0]["tool_output"]},
                          timeout=600).raise_for_status()
            started = time.perf_counter()
            for c in cases:  # one request at a time: per-request time, as an agent's call sees it
                requests.post(url, json={"query": c["query"], "tool_output": c["tool_output"]},
                              timeout=600).raise_for_status()
            record("serve", variant, time.perf_counter() - started)
            serve.delete("bench")
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "cases.jsonl"
            data.write_text("".join(json.dumps(c) + "\n" for c in cases))
            for k, (variant, kwargs) in enumerate(VARIANTS):
                started = time.perf_counter()
                evaluate_bulk(data, [SystemSpec("encoder", "encoder")], Path(tmp) / f"out{k}",
                              options=BackendOptions(engine_kwargs={"threads": 1, **kwargs}),
                              bulk=BulkSettings(workers=1, batch_size=len(cases), cpus_per_worker=1), resume=False,
                              echo=False)
                record("bulk", variant, time.perf_counter() - started)  # actor start and Ray Data included
    finally:
        serve.shutdown()
        ray.shutdown()
    by = {(p, v): s for p, v, s, _ in rows}
    for path in ("cli", "serve", "bulk"):
        print(f"{path}: shipped / every line = {by[(path, VARIANTS[1][0])] / by[(path, VARIANTS[0][0])]:.2f}x time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
