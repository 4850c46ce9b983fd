"""The ONNX encoder runtime against torch, cold and warm, on this machine (prints; asserts nothing).

    python tests/bench/bench_encoder_runtime.py --checkpoint runs/encoder/v2 --onnx runs/encoder/v2-onnx \\
        [--model squeez_ray/models/default] [--data ../shared/eval/public_cases.jsonl] [--threads 2] [--quick]

Prints, with the machine's load (``os.getloadavg``) before and after, since a shared machine skews
every number here:

- cold start to the first byte of output for a 300-line output, each a fresh process (median of
  ``--runs``): ``python -c pass``, ``squeez --backend bm25``, ``squeez`` (the shipped ONNX default),
  ``squeez --backend encoder --model CHECKPOINT`` (torch + transformers);
- warm latency, one request at a time in one process: the 300-line output, and p50 / p95 over the
  cases' outputs, for int8 and fp32 ONNX (and torch bf16 unless ``--quick``);
- bulk: every case's output in one call, lines/s and tokens/s against the matmul floor (FLOPs per
  token x tokens / a numpy fp32 2048x2048 matmul's rate on ``--threads`` threads), and F1 /
  compression per variant (evaluation only), so int8 vs fp32 vs torch shows speed and quality together.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SQUEEZ = [sys.executable, "-m", "squeez_ray.cli"]


def load() -> str:
    return "load %.1f %.1f %.1f" % os.getloadavg()


def matmul_gflops(threads: int, n: int = 2048, repeats: int = 5) -> float:
    """numpy fp32 GEMM rate (its BLAS honours OMP/OPENBLAS thread variables set before import)."""
    a, b = np.random.rand(n, n).astype(np.float32), np.random.rand(n, n).astype(np.float32)
    a @ b
    started = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * n ** 3 * repeats / (time.perf_counter() - started) / 1e9


def flops_per_token(config: dict, context: int) -> float:
    h, ffn, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    return layers * (2 * (4 * h * h + 2 * h * ffn) + 4 * context * h)


def output_of_lines(cases: list[dict], n: int = 300) -> tuple[str, str]:
    """(query, output) of exactly ``n`` lines from the case whose output is nearest that size."""
    case = min(cases, key=lambda c: abs(c["tool_output"].count("\n") + 1 - n))
    lines = case["tool_output"].split("\n")
    lines = (lines * (n // len(lines) + 1))[:n]
    return case["query"], "\n".join(lines)


def model_config(model_dir: str | Path) -> dict | None:
    """The transformers config.json of a checkpoint directory (for its FLOPs per token), if it has one."""
    path = Path(model_dir) / "config.json"
    return json.loads(path.read_text()) if path.is_file() else None


def first_byte_s(cmd: list[str], stdin: bytes, env: dict) -> float:
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    proc.stdin.write(stdin)
    proc.stdin.close()
    proc.stdout.read(1)
    elapsed = time.perf_counter() - started
    proc.stdout.read()
    if proc.wait() != 0:  # squeez fails open (prints its input): time only a command that pruned
        raise RuntimeError(f"{' '.join(cmd[:6])} ... exited {proc.returncode}")
    return elapsed


def cold_starts(query: str, output: str, checkpoint: str | None, runs: int, tmp: Path,
                also: list[str] = ()) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUEEZ_")}
    env["SQUEEZ_DAEMON"] = "0"  # cold starts: a warm process would answer instead (bench_call_latency.py measures it)
    env.update(HOME=str(tmp), SQUEEZ_STORE=str(tmp / "store"),
               PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]))
    commands = [("python -c pass", [sys.executable, "-c", "pass"]),
                ("squeez --backend bm25", [*SQUEEZ, "--backend", "bm25", query]),
                ("squeez (shipped ONNX default)", [*SQUEEZ, query])]
    for model_dir in also:
        commands.append((f"squeez --model {Path(model_dir).name} (ONNX)",
                         [*SQUEEZ, "--model", model_dir, query]))
    if checkpoint:
        commands.append(("squeez --backend encoder (torch checkpoint)",
                         [*SQUEEZ, "--backend", "encoder", "--model", checkpoint, query]))
    rows = []
    for name, cmd in commands:
        times = [first_byte_s(cmd, output.encode(), env) for _ in range(runs if "torch" not in name else max(1, runs // 2))]
        rows.append({"command": name, "first_output_s": statistics.median(times), "runs": len(times)})
        print(f"  {name:<45} {statistics.median(times):6.2f} s  (median of {len(times)}; {load()})", flush=True)
    return rows


def warm_and_bulk(name: str, pruner, cases: list[dict], probe: tuple[str, str], gflops: float,
                  config: dict | None, serial: bool) -> dict:
    from squeez_ray.infer.encoder.scoring import windows_for
    from squeez_ray.metrics import summarize
    from squeez_ray.evaluate.local import score_row
    from squeez_ray.infer.base import PruneRequest

    row: dict = {"variant": name}
    pruner.prune(*probe)  # warm-up
    row["ms_300_lines"] = min(_timed(lambda: pruner.prune(*probe)) for _ in range(3)) * 1000
    if serial:
        latencies = [_timed(lambda c=c: pruner.prune(c["query"], c["tool_output"])) * 1000 for c in cases]
        row["p50_ms"], row["p95_ms"] = float(np.percentile(latencies, 50)), float(np.percentile(latencies, 95))
    requests = [PruneRequest(c["query"], c["tool_output"]) for c in cases]
    started = time.perf_counter()
    results = pruner.prune_batch(requests, fail_open=False)
    bulk_s = time.perf_counter() - started
    lines = sum(c["tool_output"].count("\n") + 1 for c in cases)
    tokens = sum(len(w.input_ids) for c in cases
                 for w in windows_for(pruner.tokenizer, c["query"], c["tool_output"], pruner.settings.window)[1])
    row.update(bulk_s=bulk_s, lines_per_s=lines / bulk_s, tokens_per_s=tokens / bulk_s, tokens=tokens)
    if config:
        row["floor_s"] = flops_per_token(config, pruner.settings.window.max_length) * tokens / (gflops * 1e9)
        row["vs_floor"] = bulk_s / row["floor_s"]
    summary = summarize([score_row(c, r, system=name, example_index=i) for i, (c, r) in enumerate(zip(cases, results))])
    row.update(f1=summary["f1"], compression=summary["compression"])
    print("  " + "  ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items())
          + f"  ({load()})", flush=True)
    return row


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", help="torch encoder checkpoint (torch rows, FLOPs from its config.json)")
    parser.add_argument("--onnx", help="its ONNX export (int8 and fp32 rows); default: the shipped model")
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "eval" / "public_cases.jsonl"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per cold-start command")
    parser.add_argument("--also", action="append", default=[], metavar="DIR",
                        help="another ONNX encoder (e.g. the 3-layer runs/encoder/v3-l3): its cold start and int8 rows")
    parser.add_argument("--quick", action="store_true", help="no torch warm/bulk rows")
    parser.add_argument("--limit", type=int, help="only the first N cases (a loaded machine)")
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args(argv)

    import tempfile

    from squeez_ray.infer.encoder.onnx_runtime import OnnxEncoderPruner
    from squeez_ray.infer.encoder.pruner import DEFAULT_MODEL_DIR
    from squeez_ray.schema import read_examples

    cases = read_examples(args.data)[: args.limit]
    probe = output_of_lines(cases)
    onnx_dir = Path(args.onnx) if args.onnx else DEFAULT_MODEL_DIR
    config = model_config(args.checkpoint) if args.checkpoint else None
    print(f"machine: {os.cpu_count()} CPUs, {args.threads} threads; {load()}")
    gflops = matmul_gflops(args.threads)
    print(f"numpy fp32 matmul 2048x2048: {gflops:.0f} GFLOP/s")
    out: dict = {"cpus": os.cpu_count(), "threads": args.threads, "matmul_gflops_fp32": gflops}
    print("cold start to first output, 300-line output:")
    with tempfile.TemporaryDirectory() as tmp:
        out["cold"] = cold_starts(probe[0], probe[1], args.checkpoint, args.runs, Path(tmp), args.also)
    print("warm (one process), bulk (all outputs in one call):")
    rows = []
    for dtype in ("int8", "float32"):
        try:
            pruner = OnnxEncoderPruner(onnx_dir, dtype=dtype, threads=args.threads)
        except FileNotFoundError as error:
            print(f"  onnx {dtype}: skipped ({error})")
            continue
        rows.append(warm_and_bulk(f"onnx {dtype}", pruner, cases, probe, gflops, config, serial=True))
    for model_dir in args.also:
        pruner = OnnxEncoderPruner(model_dir, threads=args.threads)
        rows.append(warm_and_bulk(f"onnx int8 {Path(model_dir).name}", pruner, cases, probe, gflops,
                                  model_config(model_dir), serial=True))
    if args.checkpoint and not args.quick:
        from squeez_ray.infer.encoder.pruner import EncoderPruner

        torch_pruner = EncoderPruner(args.checkpoint, dtype="bfloat16", threads=args.threads)
        rows.append(warm_and_bulk("torch bf16", torch_pruner, cases, probe, gflops, config, serial=True))
    out["rows"] = rows
    by_name = {r["variant"]: r for r in rows}
    if "onnx int8" in by_name and "onnx float32" in by_name:
        a, b = by_name["onnx int8"], by_name["onnx float32"]
        print(f"int8 vs fp32: bulk {a['lines_per_s'] / b['lines_per_s']:.2f}x lines/s, F1 {a['f1'] - b['f1']:+.4f}")
    if "onnx int8" in by_name and "torch bf16" in by_name:
        a, b = by_name["onnx int8"], by_name["torch bf16"]
        print(f"int8 ONNX vs torch bf16: bulk {a['lines_per_s'] / b['lines_per_s']:.2f}x lines/s, "
              f"p50 {b['p50_ms'] / a['p50_ms']:.2f}x faster, F1 {a['f1'] - b['f1']:+.4f}")
    cold = {r["command"]: r["first_output_s"] for r in out["cold"]}
    print("cold start ratios vs python -c pass: " + ", ".join(
        f"{k}: {v / cold['python -c pass']:.1f}x" for k, v in cold.items() if k != "python -c pass"))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
