"""Collection throughput: tool runs per second on 1 and 2 Ray workers, and the time spent outside tools.

    flock /tmp/squeez-heavy.lock python tests/bench/bench_collect.py [--instances 12] [--cpus 2]

Input: the toy repository of ``squeez_ray.collect.toy`` with ``--instances`` instances (copies of its
two real bug fixes under new ids; each plans its own 3-7 calls), so every call is a real tool run
(pytest, mypy, ruff, pip, git, curl ...). Rows:

- plain loop: one ``CollectWorker`` called in this process, no Ray (planning, checkouts, sandbox,
  Parquet writes: the same work the job does, without scheduling);
- Ray Data, 1 and 2 workers: ``collect`` into a fresh output folder (actor start-up included, Ray
  start-up not).

Columns: tool runs written, wall seconds, runs per second, the sum of the runs' own ``duration_s``
(time inside tools), and the share of worker time spent outside tools, 1 - tool time / (wall x
workers): planning, checkouts, the sandbox wrapper, writing, scheduling. Prints the 2-worker /
1-worker speed-up. No assertion: timings depend on the machine and its load (on a 2-core machine two
workers also compete with the tools' own subprocesses).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import uuid
from dataclasses import asdict
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def plain_loop(config) -> dict:
    import pyarrow as pa

    from squeez_ray.schema.instances import read_instances
    from squeez_ray.collect.pipeline import CollectWorker

    started = time.time()
    worker = CollectWorker(asdict(config), run_id="bench-" + uuid.uuid4().hex[:6])
    rows = [{**i, "FAIL_TO_PASS": json.dumps(i["FAIL_TO_PASS"]), "done_commands": "[]"}
            for i in read_instances(config.instances)]
    summaries = []
    for start in range(0, len(rows), config.instances_per_shard):
        summaries += worker(pa.Table.from_pylist(rows[start:start + config.instances_per_shard])).to_pylist()
    written = [s for s in summaries if s["status"] == "written"]
    return {"runs": len(written), "wall_s": time.time() - started, "tool_s": sum(s["duration_s"] for s in written)}


def ray_run(config) -> dict:
    from squeez_ray.collect.pipeline import collect

    manifest = collect(config)
    counts = manifest["counts"]
    return {"runs": counts["observations_written"], "wall_s": manifest["wall_s"], "tool_s": counts["tool_time_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=12)
    parser.add_argument("--cpus", type=int, default=2)
    args = parser.parse_args()

    import ray

    from squeez_ray.collect.pipeline import CollectConfig
    from squeez_ray.collect.toy import build_toy_dataset

    with tempfile.TemporaryDirectory(prefix="bench-collect-") as tmp:
        toy = build_toy_dataset(Path(tmp) / "toy", extra_instances=max(0, args.instances - 2))

        def config(name: str, workers: int) -> CollectConfig:
            return CollectConfig(instances=str(toy["instances"]), mirrors=str(toy["mirrors"]),
                                 output_dir=str(Path(tmp) / name), workers=workers, cpus_per_worker=0.5,
                                 instances_per_shard=2, timeout_s=120)

        results = {"plain loop (no Ray)": (plain_loop(config("plain", 1)), 1)}
        ray.init(address="local", num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
        try:
            from ray.data import DataContext

            DataContext.get_current().enable_progress_bars = False
            for workers in (1, 2):
                results[f"Ray Data, {workers} worker(s)"] = (ray_run(config(f"ray{workers}", workers)), workers)
        finally:
            ray.shutdown()

    print(f"\n{args.instances} instances of the toy repository, {os.cpu_count()} CPUs on this machine\n")
    print(f"| {'run':<22} | {'tool runs':>9} | {'wall s':>7} | {'runs/s':>6} | {'in tools s':>10} | {'outside tools':>13} |")
    print(f"|{'-' * 24}|{'-' * 11}|{'-' * 9}|{'-' * 8}|{'-' * 12}|{'-' * 15}|")
    for name, (r, workers) in results.items():
        outside = 1 - r["tool_s"] / (r["wall_s"] * workers)
        print(f"| {name:<22} | {r['runs']:>9} | {r['wall_s']:>7.2f} | {r['runs'] / r['wall_s']:>6.2f} | "
              f"{r['tool_s']:>10.2f} | {outside:>12.0%} |")
    one, two = results["Ray Data, 1 worker(s)"][0], results["Ray Data, 2 worker(s)"][0]
    print(f"\nspeed-up 2 workers / 1 worker: {(two['runs'] / two['wall_s']) / (one['runs'] / one['wall_s']):.2f}x")


if __name__ == "__main__":
    main()
