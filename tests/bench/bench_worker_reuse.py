"""What keeping idle Ray workers saves: the same Ray Data work on an embedded Ray, Ray's defaults against
squeez_ray.ray_init.EMBEDDED_SYSTEM_CONFIG (idle workers kept a minute, no metrics collection).

    .venv/bin/python tests/bench/bench_worker_reuse.py [--rounds 4] [--rows 64]

Each run starts its own local Ray (2 CPUs, no dashboard), then runs ``--rounds`` small pipelines in turn,
each a stage of fractional-CPU tasks (0.1 CPU, as the labelling rounds' stages) that import the labelling
pipeline and wait 0.3 s per batch (a teacher request), with 3 s between rounds (the driver writing a
round's rows): the shape of a labelling job's query, spans and retry rounds. It prints, per configuration, the worker processes the node started,
the wall seconds and the CPU seconds of the whole process tree, then the ratios default / embedded,
measured in this one run. Read the ratios; absolute times only from an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CHILD = r"""
import json, os, sys, time
import psutil, ray
system_config = json.loads(sys.argv[1])
rounds, rows = int(sys.argv[2]), int(sys.argv[3])
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
         **({"_system_config": system_config} if system_config else {}))
me = psutil.Process()
workers, cpu = set(), {}

def sample():
    for p in me.children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
            t = p.cpu_times()
            cpu[p.pid] = t.user + t.system
            if "default_worker.py" in cmd or "setup_worker.py" in cmd or cmd.startswith("ray::"):  # renamed once up
                workers.add(p.pid)
        except psutil.Error:
            pass

def stage(batch):
    import squeez_ray.label.pipeline  # noqa: F401 - what a labelling round's worker imports
    time.sleep(0.3)  # a teacher request in flight
    return batch

started = time.perf_counter()
for _ in range(rounds):
    ds = ray.data.range(rows, override_num_blocks=rows // 4).map_batches(stage, num_cpus=0.1, batch_size=4)
    for _ in ds.iter_batches():
        sample()
    sample()
    time.sleep(3)  # between rounds: the driver writes the round's rows
    sample()
wall = time.perf_counter() - started
own = me.cpu_times()
ray.shutdown()
print(json.dumps({"workers": len(workers), "wall_s": wall, "cpu_s": sum(cpu.values()) + own.user + own.system}))
"""


def run(system_config: dict, rounds: int, rows: int) -> dict:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env.setdefault("RAY_AUTH_MODE", "disabled")
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(system_config), str(rounds), str(rows)],
                         capture_output=True, text=True, env=env, timeout=900)
    if out.returncode:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    from squeez_ray.ray_init import EMBEDDED_SYSTEM_CONFIG

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--rows", type=int, default=64)
    args = parser.parse_args()
    results = {"Ray's defaults": run({}, args.rounds, args.rows),
               "EMBEDDED_SYSTEM_CONFIG": run(EMBEDDED_SYSTEM_CONFIG, args.rounds, args.rows)}
    print(f"{'configuration':<24} {'workers':>8} {'wall s':>8} {'CPU s':>8}")
    for name, r in results.items():
        print(f"{name:<24} {r['workers']:>8} {r['wall_s']:>8.1f} {r['cpu_s']:>8.1f}")
    default, embedded = results.values()
    print(f"default / embedded: workers {default['workers'] / max(embedded['workers'], 1):.2f}x, "
          f"wall {default['wall_s'] / embedded['wall_s']:.2f}x, CPU {default['cpu_s'] / embedded['cpu_s']:.2f}x")


if __name__ == "__main__":
    t = time.perf_counter()
    main()
    print(f"(bench took {time.perf_counter() - t:.0f} s)")
