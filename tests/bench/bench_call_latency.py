"""What one agent tool call pays for squeez: the raw command vs ``squeez run`` cold and warm, and the hook.

    python tests/bench/bench_call_latency.py                 # 3 / 300 / 1,000 / 5,000 / 20,000 lines + a real file
    python tests/bench/bench_call_latency.py --quick         # 3 and 300 lines, one run each
    python tests/bench/bench_call_latency.py --backend bm25 --runs 5 --out rows.json

Each output is a file that ``cat`` prints (a synthetic pytest-like log of N lines with one failure
near its end, and one real file of this repository), so the raw command costs what a quick tool
call costs. Per output, whole processes timed from launch to exit:

- raw:   ``cat FILE``
- cold:  ``squeez run QUERY -- cat FILE`` with ``SQUEEZ_DAEMON=0`` (every call loads its pruner)
- warm:  the same through the warm pruner process (``squeez daemon start`` first, one call to warm it)
- first: the call that finds no warm process: it starts one and prunes in its own process (the
  shipped behaviour); ``first+wait`` instead waits up to ``--start-wait`` s for it (the alternative
  measured to choose between them; daemon_client.START_WAIT_S)

and the hook alone (``squeez hook claude-code`` on a Bash call it wraps), beside the interpreter's own
start (``python -c pass``). Medians over ``--runs``
(outputs of 5,000 lines and more: ``--big-runs``), each with its ratio to the raw command and the
lines kept; "passed through" means unpruned (below min_lines, a timeout or a failure). Runs in
its own XDG_RUNTIME_DIR and store, and stops the warm process it started. No assertion: it prints.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SIZES = (3, 300, 1000, 5000, 20000)
REAL_FILE = REPO / "squeez_ray" / "cli" / "prune.py"
QUERY = "which test failed and why"
HOOK_PAYLOAD = json.dumps({"tool_name": "Bash", "hook_event_name": "PreToolUse",
                           "tool_input": {"command": "pytest -q", "description": "run the test suite"}}).encode()
FOOTER = re.compile(rb"\[squeez: kept (\d+) of (\d+) lines")
WAITING_CLIENT = ("import sys; import squeez_ray.cli.daemon_client as c; c.START_WAIT_S = float(sys.argv[1]); "
                  "from squeez_ray.cli import main; sys.exit(main(sys.argv[2:]))")


def pytest_log(n: int) -> str:
    """A pytest -v style log of ``n`` lines: passing tests, one failure with its traceback, the summary."""
    if n < 10:
        return "".join(f"tests/test_mod.py::test_case_{i} PASSED\n" for i in range(n - 1)) + "1 failed in 0.01s\n"
    tail = ["", "=================================== FAILURES ===================================",
            "_______________________________ test_parse_header ______________________________",
            "    def test_parse_header():", ">       assert parse_header('X-Id: 7') == ('X-Id', 8)",
            "E       AssertionError: assert ('X-Id', 7) == ('X-Id', 8)", "tests/test_parser.py:41: AssertionError",
            "=========================== short test summary info ============================",
            "FAILED tests/test_parser.py::test_parse_header - AssertionError: assert ('X-Id', 7) == ('X-Id', 8)",
            f"========================= 1 failed, {n - 10} passed in 12.52s ========================="]
    head = [f"tests/test_mod{i // 50}.py::test_case_{i} PASSED{' ' * (i % 7)} [{100 * i // n:3d}%]"
            for i in range(n - len(tail))]
    return "\n".join(head + tail) + "\n"


def squeez_cmd() -> list[str]:
    script = Path(sys.executable).parent / "squeez"
    return [str(script)] if script.exists() else [sys.executable, "-m", "squeez_ray.cli"]


def timed(cmd: list[str], env: dict, stdin: bytes = b"") -> tuple[float, bytes]:
    started = time.perf_counter()
    out = subprocess.run(cmd, input=stdin, capture_output=True, env=env, timeout=600)
    elapsed = time.perf_counter() - started
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr.decode()[-2000:]}")
    return elapsed, out.stdout


def kept(stdout: bytes) -> str:
    found = FOOTER.findall(stdout)
    return f"{int(found[-1][0])}/{int(found[-1][1])}" if found else "passed through"


def measure(cmd: list[str], env: dict, runs: int, stdin: bytes = b"", before=None) -> dict:
    times, outcome = [], ""
    for _ in range(runs):
        if before:
            before()
        elapsed, stdout = timed(cmd, env, stdin)
        times.append(elapsed)
        outcome = kept(stdout)
    return {"median_s": statistics.median(times), "best_s": min(times), "runs": runs, "kept": outcome}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--big-runs", type=int, default=1, help="runs for outputs of 5,000 lines and more")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--quick", action="store_true", help="3 and 300 lines, one run each, no first+wait")
    parser.add_argument("--backend", help="default: the shipped default (the encoder)")
    parser.add_argument("--start-wait", type=float, default=3.0, help="first+wait: how long the first call waits")
    parser.add_argument("--out", help="also write the rows here as JSON")
    args = parser.parse_args(argv)
    sizes = [3, 300] if args.quick and args.sizes == parser.get_default("sizes") else \
        [int(s) for s in args.sizes.split(",")]
    runs = 1 if args.quick else args.runs
    load_before = os.getloadavg()
    squeez = squeez_cmd()
    backend = ["--backend", args.backend] if args.backend else []
    root = Path(tempfile.mkdtemp(prefix="squeez-bench-"))
    run_dir = root / "run"
    run_dir.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUEEZ_")}
    env.update(HOME=str(root), XDG_RUNTIME_DIR=str(run_dir), XDG_CONFIG_HOME=str(root / "config"),
               SQUEEZ_STORE=str(root / "store"))
    cold_env, warm_env = {**env, "SQUEEZ_DAEMON": "0"}, {**env, "SQUEEZ_DAEMON": "1"}

    def stop() -> None:  # no warm process, and none started lately (daemon_client spawns at most every 30 s)
        subprocess.run([*squeez, "daemon", "stop"], env=warm_env, capture_output=True)
        for stamp in run_dir.glob("squeez/*.spawned"):
            stamp.unlink()

    outputs = [(f"{n:,} lines", root / f"log{n}.txt", pytest_log(n)) for n in sizes]
    if not args.quick:
        outputs.append((f"real file ({REAL_FILE.name})", REAL_FILE, None))
    rows = []
    try:
        for _, path, text in outputs:
            if text is not None:
                path.write_text(text)
        rows.append({"output": "python -c pass", "mode": "floor", **measure([sys.executable, "-c", "pass"], env,
                                                                              max(runs, 3))})
        rows.append({"output": "hook alone", "mode": "hook", **measure([*squeez, "hook", "claude-code"], env,
                                                                          max(runs, 3), HOOK_PAYLOAD)})
        for label, path, _ in outputs:
            n = sum(1 for _ in path.open("rb"))
            reps = args.big_runs if n >= 5000 else runs
            call = [*squeez, "run", *backend, QUERY, "--", "cat", str(path)]
            raw = measure(["cat", str(path)], env, max(reps, 3))
            rows.append({"output": label, "mode": "raw", **raw})
            rows.append({"output": label, "mode": "cold", **measure(call, cold_env, reps)})
            rows.append({"output": label, "mode": "first", **measure(call, warm_env, 1, before=stop)})
            if not args.quick and n >= 20:
                waiting = [sys.executable, "-c", WAITING_CLIENT, str(args.start_wait), *call[len(squeez):]]
                rows.append({"output": label, "mode": "first+wait", **measure(waiting, warm_env, 1, before=stop)})
            started = subprocess.run([*squeez, "daemon", "start", *backend_config(args, root)], env=warm_env,
                                     capture_output=True)
            if started.returncode != 0:
                raise SystemExit(f"squeez daemon start failed: {started.stderr.decode()[-2000:]}")
            timed(call, warm_env)  # the first call after a start: the pruner is loaded, its caches are not
            rows.append({"output": label, "mode": "warm", **measure(call, warm_env, reps)})
            for row in rows:
                if row["output"] == label:
                    row["x_raw"] = row["median_s"] / raw["median_s"]
                    row["added_ms"] = (row["median_s"] - raw["median_s"]) * 1000
    finally:
        stop()
        shutil.rmtree(root, ignore_errors=True)
    load_after = os.getloadavg()
    print(f"squeez call latency, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, "
          f"load {load_before[0]:.2f} before / {load_after[0]:.2f} after, backend {args.backend or 'default'}")
    print(f"{'output':26s} {'mode':11s} {'median s':>9s} {'best s':>8s} {'runs':>4s} {'x raw':>8s} "
          f"{'added ms':>9s}  kept")
    for row in rows:
        ratio = f"{row['x_raw']:8.1f}" if "x_raw" in row else f"{'':8s}"
        added = f"{row['added_ms']:9.0f}" if "added_ms" in row else f"{'':9s}"
        print(f"{row['output']:26s} {row['mode']:11s} {row['median_s']:9.3f} {row['best_s']:8.3f} {row['runs']:4d} "
              f"{ratio} {added}  {row['kept'] if row['mode'] not in ('raw', 'hook', 'floor') else ''}")
    if args.out:
        Path(args.out).write_text(json.dumps({"load": [load_before, load_after], "rows": rows}, indent=1))
    return 0


def backend_config(args: argparse.Namespace, root: Path) -> list[str]:
    """``squeez daemon start`` preloads the configured backend: a config file naming --backend, if given."""
    if not args.backend:
        return []
    config = root / "bench-config.yaml"
    config.write_text(f"backend: {args.backend}\n")
    return ["--config", str(config)]


if __name__ == "__main__":
    sys.exit(main())
