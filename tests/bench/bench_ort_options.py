"""ONNX Runtime session options for the shipped int8 encoder, chosen by measurement (issue 36 item 4).

    .venv/bin/python tests/bench/bench_ort_options.py [--repeat 7] [--model DIR]

For each candidate (intra-op threads, graph optimisation level, execution mode) it builds a session,
times the build (a cold call pays it), then times the forward passes of two workloads: the shipped
path's (a 1,000-line log's shortlist: 1,024 line tokens, a few windows) and scoring every line of a
300-line log (Serve / bulk with the shortlist off), both batched as the pruner batches them. Runs are interleaved round-robin across the
candidates, so a machine whose load drifts (this one is shared) moves every row alike; the table prints
medians and each row's ratio to the factory's current setting. No assertion: read the ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_block_first import pytest_log  # noqa: E402


def workloads(model_dir: Path):
    """(name, list of padded batches) for the shortlisted and the every-line path, as the pruner builds them."""
    from squeez_ray.infer.encoder.onnx_runtime import OnnxEncoderPruner

    pruner = OnnxEncoderPruner(model_dir)
    out = {}
    for name, kwargs, n_lines in (("shortlist", {}, 1000), ("every line", {"shortlist_tokens": 0, "decoder": "lines"}, 300)):
        pruner.choose_decoder(kwargs)
        batches = []
        forward = pruner._forward

        def record(*arrays, _batches=batches):
            _batches.append(arrays)
            return forward(*arrays)

        pruner._forward = record
        pruner.prune("which test failed and why", pytest_log(n_lines))
        pruner._forward = forward
        out[name] = batches
    return out


def make_session(ort, path: Path, threads: int, level: str, mode: str):
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    if threads:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = getattr(ort.ExecutionMode, mode)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    started = time.perf_counter()
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session, time.perf_counter() - started


def run_batches(session, batches) -> float:
    from squeez_ray.infer.encoder.onnx_runtime import onnx_forward

    forward = onnx_forward(session)
    started = time.perf_counter()
    for arrays in batches:
        forward(*arrays)
    return time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--model", default=None)
    args = parser.parse_args(argv)
    from squeez_ray.infer.encoder.onnx_runtime import onnx_file
    from squeez_ray.infer.encoder.pruner import DEFAULT_MODEL_DIR
    from squeez_ray.infer.ort_import import import_onnxruntime

    ort = import_onnxruntime()
    model_dir = Path(args.model) if args.model else DEFAULT_MODEL_DIR
    path = onnx_file(model_dir, None)
    loads = workloads(model_dir)
    candidates = [(t, level, mode) for t in (0, 1, 2) for level in ("ORT_ENABLE_ALL", "ORT_ENABLE_EXTENDED",
                                                                     "ORT_ENABLE_BASIC")
                  for mode in ("ORT_SEQUENTIAL",)]
    candidates += [(0, "ORT_ENABLE_ALL", "ORT_PARALLEL")]
    current = (0, "ORT_ENABLE_ALL", "ORT_SEQUENTIAL")
    sessions, build = {}, {c: [] for c in candidates}
    times = {(c, w): [] for c in candidates for w in loads}
    for c in candidates:
        sessions[c], _ = make_session(ort, path, *c)
        for batches in loads.values():
            run_batches(sessions[c], batches)  # warm-up
    for _ in range(args.repeat):
        for c in candidates:  # round-robin: drift in the machine's load moves every row alike
            build[c].append(make_session(ort, path, *c)[1])
            for w, batches in loads.items():
                times[(c, w)].append(run_batches(sessions[c], batches))
    load = os.getloadavg()
    print(f"model {path.name}; {os.cpu_count()} cpus; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"medians of {args.repeat}; windows: " + ", ".join(f"{w} {sum(b[0].shape[0] for b in bs)}"
                                                            for w, bs in loads.items()))
    header = f"{'threads':>7} {'graph':>20} {'mode':>14} {'build s':>8}" + "".join(
        f" {w + ' s':>13} {'ratio':>6}" for w in loads)
    print(header)
    med = {k: statistics.median(v) for k, v in times.items()}
    for c in candidates:
        row = f"{c[0] or 'default':>7} {c[1]:>20} {c[2]:>14} {statistics.median(build[c]):8.3f}"
        for w in loads:
            row += f" {med[(c, w)]:13.3f} {med[(c, w)] / med[(current, w)]:6.2f}"
        print(row + ("   <- current" if c == current else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
