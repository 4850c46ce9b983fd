"""Re-pruning throughput with the BM25 backend: Ray Data on 1 and 2 workers, against plain loops.

    flock /tmp/squeez-heavy.lock python tests/bench/bench_reprune.py [--copies 8] [--cpus 2]

The input is the real stored runs of ../shared/trajectories, repeated ``--copies`` times in a
temporary tree (so there are enough files to share out). Rows:

- backend loop: ``pruner.prune_batch`` over the same observations the job prunes, nothing else
  (the floor: what the backend costs);
- plain loop: ``process_units`` in this process (detect, parse, prune, verify, write, markers), no Ray;
- Ray Data, 1 and 2 workers: ``run_reprune`` into a fresh output tree (actor start-up included,
  Ray start-up not).

Prints observations pruned per second and each row's time relative to the backend loop, plus
the 2-worker / 1-worker speed-up. No assertion: timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from squeez_ray.infer.registry import BackendOptions, build_pruner
from squeez_ray.infer.base import PruneRequest, RenderOptions
from squeez_ray.trajectories.detect import ADAPTERS, detect_format, discover_units
from squeez_ray.trajectories.pipeline import RepruneConfig, run_reprune
from squeez_ray.trajectories.process import (
    RepruneSettings,
    build_query,
    process_units,
    split_trailing_newline,
)

# The shared data beside the checkout, or where SQUEEZ_SHARED says (as in tests/conftest.py).
SHARED = Path(os.environ.get("SQUEEZ_SHARED") or Path(__file__).resolve().parents[2].parent / "shared") / "trajectories"


def make_input(root: Path, copies: int) -> Path:
    runs = root / "runs"
    for k in range(copies):
        shutil.copytree(SHARED, runs / f"copy{k}", copy_function=shutil.copyfile)
    return runs


def requests_of(runs: Path, settings: RepruneSettings) -> list[PruneRequest]:
    """The observations the job sends to the backend (same query and min-lines rules)."""
    requests = []
    for unit in discover_units(runs):
        fmt = detect_format(runs / unit)
        if fmt is None:
            continue
        adapter = ADAPTERS[fmt]
        for obs in adapter.iter_observations(adapter.load(runs / unit)):
            body, _ = split_trailing_newline(obs.text)
            query = build_query(obs, settings.query_source, settings.query, settings.max_query_chars)
            if obs.skip_reason is None and query and len(body.split("\n")) >= settings.min_lines:
                requests.append(PruneRequest(query, body))
    return requests


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, default=8, help="times the sample tree is repeated (default 8)")
    parser.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray (default 2)")
    args = parser.parse_args()
    import ray

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = make_input(root, args.copies)
        settings = RepruneSettings(input_dir=str(runs), output_dir=str(root / "plain"))
        requests = requests_of(runs, settings)
        pruner = build_pruner("bm25")
        rows = []

        started = time.perf_counter()
        for i in range(0, len(requests), settings.batch_size):
            pruner.prune_batch(requests[i:i + settings.batch_size], render_options=RenderOptions(markers=True),
                               fail_open=False)
        rows.append(("backend loop", time.perf_counter() - started))

        started = time.perf_counter()
        process_units(discover_units(runs), pruner, settings)
        rows.append(("plain loop (parse+prune+write)", time.perf_counter() - started))

        ray.init(address="local", num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
        for workers in (1, 2):
            out = root / f"ray{workers}"
            config = RepruneConfig(settings=RepruneSettings(input_dir=str(runs), output_dir=str(out)),
                                   backend="bm25", options=BackendOptions(), workers=workers, files_per_batch=4)
            started = time.perf_counter()
            summary = run_reprune(config, echo=False)
            rows.append((f"Ray Data, {workers} worker(s)", time.perf_counter() - started))
            assert summary["total"]["pruned"] > 0
        ray.shutdown()

    floor = rows[0][1]
    print(f"\n{len(requests)} observations pruned per run ({args.copies} copies of the samples, BM25, "
          f"{args.cpus} CPUs)\n")
    print("| run | seconds | observations/s | time / backend loop |")
    print("|---|---:|---:|---:|")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.2f} | {len(requests) / seconds:.0f} | {seconds / floor:.2f}x |")
    one, two = rows[2][1], rows[3][1]
    print(f"\n2 workers vs 1 worker: {one / two:.2f}x the throughput")
    print(f"Ray Data overhead over the plain loop (1 worker): {rows[2][1] - rows[1][1]:+.2f} s")


if __name__ == "__main__":
    main()
