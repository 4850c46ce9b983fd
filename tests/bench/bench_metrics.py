"""Benchmark: scoring 1,000 examples shaped like the public cases (target: under 2 s on one core).

    .venv/bin/python tests/bench/bench_metrics.py [--cases ../shared/eval/public_cases.jsonl] [--n 1000]

The examples cycle through the public cases with a 10%-of-lines prediction (the random baseline,
a different seed per cycle). Prints the time for every metric of every example, the time of the
fuzzy F1 alone against the plain reference implementation in tests/unit/test_metrics_reference.py,
and a worst case METRICS.md names (a 3,000-line prediction against a 50-line gold). It also checks
that the fast fuzzy F1 gives results identical to the reference on every example (exit 1 if not).
Speed is printed, never asserted: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import time
from pathlib import Path

from squeez_ray.infer.baselines import RandomLines
from squeez_ray.metrics import fuzzy_scores, norm, score_example
from squeez_ray.infer.base import PruneRequest
from squeez_ray.schema import read_examples
from squeez_ray.spans import kept_text, split_lines

HERE = Path(__file__).resolve().parent
TARGET_S = 2.0


def load_reference():
    path = HERE.parent / "unit" / "test_metrics_reference.py"
    spec = importlib.util.spec_from_file_location("metrics_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reference_fuzzy_scores


def build_workload(cases_path: Path, n: int):
    cases = read_examples(cases_path)
    work = []
    for i in range(n):
        case = cases[i % len(cases)]
        pruner = RandomLines(0.10, seed=i // len(cases))
        pred = pruner.prune_batch([PruneRequest(case["query"], case["tool_output"])], fail_open=False)[0].spans
        gold = [(s["start_line"], s["end_line"]) for s in case["gold_spans"]]
        work.append((case["tool_output"], gold, [tuple(s) for s in pred]))
    return work


def timed(fn):
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=str(HERE.parents[2] / "shared" / "eval" / "public_cases.jsonl"))
    parser.add_argument("--n", type=int, default=1000)
    args = parser.parse_args()
    reference = load_reference()
    work = build_workload(Path(args.cases), args.n)

    all_s, _ = timed(lambda: [score_example(o, g, p) for o, g, p in work])
    lines = [(norm(kept_text(split_lines(o), p)), norm(kept_text(split_lines(o), g))) for o, g, p in work]
    fast_s, fast = timed(lambda: [fuzzy_scores(p, g) for p, g in lines])
    ref_s, ref = timed(lambda: [reference(p, g) for p, g in lines])
    mismatches = sum(a != b for a, b in zip(fast, ref))

    rng = random.Random(0)
    words = [f"token{k}" for k in range(400)]
    big_pred = [" ".join(rng.choices(words, k=rng.randint(3, 12))) for _ in range(3000)]
    big_gold = rng.sample(big_pred, 25) + [" ".join(rng.choices(words, k=8)) for _ in range(25)]
    big_fast_s, big_fast = timed(lambda: fuzzy_scores(big_pred, big_gold))
    big_ref_s, big_ref = timed(lambda: reference(big_pred, big_gold))
    mismatches += big_fast != big_ref

    verdict = "within" if all_s < TARGET_S else "OVER"
    print(f"{args.n} examples, every metric:        {all_s:.3f} s ({verdict} the {TARGET_S:.0f} s target)")
    print(f"fuzzy F1 only, fast vs reference:   {fast_s:.3f} s vs {ref_s:.3f} s "
          f"(reference / fast = {ref_s / fast_s:.1f}x)")
    print(f"3,000-line prediction vs 50 gold:   {big_fast_s:.3f} s vs {big_ref_s:.3f} s "
          f"(reference / fast = {big_ref_s / big_fast_s:.1f}x)")
    print(f"results identical to the reference: {'yes' if not mismatches else f'NO ({mismatches} differ)'}")
    return 0 if not mismatches else 1


if __name__ == "__main__":
    sys.exit(main())
