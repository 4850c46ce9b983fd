"""Encoder pruner speed on this machine, against the machine's own matrix-multiply limit.

    flock /tmp/squeez-heavy.lock .venv/bin/python tests/bench/bench_encoder.py --model runs/encoder/minilm-512 \\
        [--compare runs/encoder/minilm --compare runs/encoder/minilm-l3] [--data ../shared/eval/public_cases.jsonl] \\
        [--threads 2] [--quick]

Prints (no assertions: timings depend on the machine and its load, shown by ``uptime``):

- the matmul rate: a 2048x2048 matmul in fp32 and bf16 on ``--threads`` threads (GFLOP/s);
- per variant: p50 / p95 latency of one request at a time over every public case's output, encoder
  tokens per second, the physical floor (FLOPs per token x tokens / measured bf16 or fp32 rate)
  and how far the measured time is from it, bulk throughput (all outputs in one batched call) in
  lines per second, and F1 / compression on the cases (evaluation only; nothing here is tuned);
- variants of ``--model``: bf16 (default), fp32, no per-line token cap (128 instead of 32), no window
  batching (one window per forward); then every ``--compare`` checkpoint (another window size, a
  3-layer model trained with keep_layers: 3, ...) as it is stored, bf16, with its own latency pass.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def matmul_gflops(dtype, threads: int, n: int = 2048, repeats: int = 5) -> float:
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    started = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * n ** 3 * repeats / (time.perf_counter() - started) / 1e9


def flops_per_token(config, context: int) -> float:
    """Forward FLOPs of one token: 2 x (QKV + output + FFN weights) per layer, plus attention over
    ``context`` tokens (scores and weighted sum: 4 x context x hidden per layer)."""
    h, ffn, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    return layers * (2 * (4 * h * h + 2 * h * ffn) + 4 * context * h)


def window_tokens(pruner, cases) -> tuple[int, int]:
    from squeez_ray.infer.encoder.scoring import windows_for

    tokens = windows = 0
    for case in cases:
        _, ws = windows_for(pruner.tokenizer, case["query"], case["tool_output"], pruner.settings.window)
        tokens += sum(len(w.input_ids) for w in ws)
        windows += len(ws)
    return tokens, windows


def quality(results, cases) -> dict[str, float]:
    from squeez_ray.metrics import summarize
    from squeez_ray.evaluate.local import score_row

    overall = summarize([score_row(c, r, system="x", example_index=i) for i, (c, r) in enumerate(zip(cases, results))])
    return {k: overall[k] for k in ("f1", "precision", "recall", "compression", "negatives_empty")}


def run_variant(name: str, pruner, cases, rates: dict[str, float], *, serial: bool = True) -> dict[str, object]:
    """One variant: (optionally) one request at a time for latency, then one bulk batched call."""
    from squeez_ray.infer.base import PruneRequest

    latencies = []
    pruner.prune(cases[0]["query"], cases[0]["tool_output"])  # warm-up: first-call allocations
    for case in cases if serial else []:
        started = time.perf_counter()
        pruner.prune(case["query"], case["tool_output"], fail_open=False)
        latencies.append(time.perf_counter() - started)
    tokens, windows = window_tokens(pruner, cases)
    config = pruner.model.encoder.config
    mean_context = tokens / max(windows, 1)
    floor = flops_per_token(config, mean_context) * tokens / (rates[pruner.dtype if pruner.dtype == "float32"
                                                                     else "bfloat16"] * 1e9)
    lines = sum(len(c["tool_output"].split("\n")) for c in cases)
    started = time.perf_counter()
    results = pruner.prune_batch([PruneRequest(c["query"], c["tool_output"]) for c in cases], fail_open=False)
    bulk = time.perf_counter() - started
    measured = bulk  # every variant compared on the same bulk pass; the serial pass gives latency
    row = {"variant": name, "layers": config.num_hidden_layers, "dtype": pruner.dtype,
           "p50_ms": 1000 * float(np.percentile(latencies, 50)) if latencies else None,
           "p95_ms": 1000 * float(np.percentile(latencies, 95)) if latencies else None,
           "tokens": tokens, "tokens_per_s": tokens / measured,
           "serial_tokens_per_s": tokens / sum(latencies) if latencies else None, "mflop_per_token": flops_per_token(config, mean_context) / 1e6,
           "floor_s": floor, "measured_s": measured, "x_over_floor": measured / floor,
           "bulk_lines_per_s": lines / bulk, **quality(results, cases)}  # F1 of the bulk pass's answers
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="encoder checkpoint (jobs/train_encoder.py)")
    parser.add_argument("--compare", action="append", default=[], metavar="DIR",
                        help="another trained checkpoint to time and score the same way (repeatable)")
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "eval" / "public_cases.jsonl"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", help="also write the rows as JSON here")
    parser.add_argument("--matmul-n", type=int, default=2048,
                        help="size of the square matmul that measures the machine's floor (smaller: quicker, rougher)")
    parser.add_argument("--quick", action="store_true",
                        help="latency pass for the default variant only; other variants bulk pass only; no unbatched run")
    args = parser.parse_args(argv)

    import torch

    from squeez_ray.infer.encoder.pruner import EncoderPruner
    from squeez_ray.schema import read_examples

    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)
    rates = {name: matmul_gflops(dtype, args.threads, n=args.matmul_n)
             for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16))}
    print(json.dumps({f"matmul_{args.matmul_n}_gflops": {k: round(v, 1) for k, v in rates.items()}, "threads": args.threads,
                      "cpus": os.cpu_count()}), flush=True)
    cases = read_examples(args.data)
    print(f"{len(cases)} cases, {sum(len(c['tool_output'].split(chr(10))) for c in cases)} lines", flush=True)

    rows = []
    base = EncoderPruner(args.model, dtype="bfloat16", threads=args.threads)
    layers, window = base.model.encoder.config.num_hidden_layers, base.settings.window.max_length
    rows.append(run_variant(f"{Path(args.model).name} ({layers} layers, {window}-token windows), bf16", base, cases,
                            rates))
    serial = not args.quick
    base.dtype = "float32"
    rows.append(run_variant("fp32", base, cases, rates, serial=serial))
    base.dtype = "bfloat16"
    capped = base.settings.window
    base.settings.window = dataclasses.replace(capped, max_tokens_per_line=128)
    rows.append(run_variant("no line cap (128 tokens/line)", base, cases, rates, serial=serial))
    base.settings.window = capped
    if not args.quick:  # ~10x slower than batched on a 3-case probe; minutes over all cases
        base.tokens_per_batch = 1  # every window its own forward pass
        rows.append(run_variant("no window batching", base, cases, rates, serial=serial))
        base.tokens_per_batch = 8192
    for directory in args.compare:
        other = EncoderPruner(directory, dtype="bfloat16", threads=args.threads)
        layers, window = other.model.encoder.config.num_hidden_layers, other.settings.window.max_length
        rows.append(run_variant(f"{Path(directory).name} ({layers} layers, {window}-token windows)", other, cases,
                                rates))
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"matmul_gflops": rates, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
