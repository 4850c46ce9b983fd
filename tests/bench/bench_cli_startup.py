"""Start-up of `squeez` with the BM25 backend: time from launch to the answer on stdout.

    python tests/bench/bench_cli_startup.py [--runs 10]

Prints the median and best wall time over the runs for `python -c pass` (the interpreter floor),
`squeez --help` (argument parsing only), a pass-through below min_lines (settings + input, no
backend), and a real BM25 prune of a 300-line log, with each ratio to `python -c pass`. Target:
the BM25 prune under 0.5 s. No assertion: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SQUEEZ = Path(sys.executable).parent / "squeez"


def timed(cmd: list[str], stdin: bytes, env: dict, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        out = subprocess.run(cmd, input=stdin, capture_output=True, env=env)
        times.append(time.perf_counter() - started)
        if out.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.decode()[-2000:]}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    log = "\n".join(f"INFO step {i}: compiling module_{i}.c" for i in range(300)).encode() + b"\nERROR boom\n"
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SQUEEZ_")}
        env["SQUEEZ_DAEMON"] = "0"  # cold starts: a warm process would answer instead (bench_call_latency.py measures it)
        env.update(HOME=home, SQUEEZ_STORE=str(Path(home) / "store"))
        cases = [
            ("python -c pass", [sys.executable, "-c", "pass"], b""),
            ("squeez --help", [str(SQUEEZ), "--help"], b""),
            ("squeez pass-through (min_lines)", [str(SQUEEZ), "--backend", "bm25", "--min-lines", "1000", "q"], log),
            ("squeez --backend bm25 (300 lines)", [str(SQUEEZ), "--backend", "bm25", "error"], log),
        ]
        timed(cases[-1][1], cases[-1][2], env, 1)  # warm the page cache and bytecode
        floor = None
        print(f"{'case':36s} {'median s':>9s} {'best s':>8s} {'x python':>9s}")
        for name, cmd, stdin in cases:
            times = timed(cmd, stdin, env, args.runs)
            median = statistics.median(times)
            floor = floor or median
            print(f"{name:36s} {median:9.3f} {min(times):8.3f} {median / floor:9.1f}")


if __name__ == "__main__":
    main()
