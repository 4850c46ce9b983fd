"""Benchmark: map 300 generated lines onto a 5,000-line tool output (target < 50 ms). Prints, never asserts.

Run: python tests/bench/bench_mapping.py
The reply mixes what models produce: exact copies (some with repeated lines like ``}``), copies with
changed whitespace, near copies (fuzzy pass) and invented lines (a full fuzzy scan each, the slow case).
"""

from __future__ import annotations

import random
import statistics
import time

from squeez_ray.infer.mapping import map_lines_to_spans


def make_case(seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    source = []
    for i in range(5000):
        kind = i % 7
        source.append("}" if kind == 0 else f"    value_{i} = compute(item_{i % 311}, flag={i % 3 == 0})" if kind < 4
                      else f"src/module_{i % 53}.py:{i}: warning: unused variable 'tmp_{i}'")
    picked = sorted(rng.sample(range(5000), 300))
    generated = []
    for n, index in enumerate(picked):
        line = source[index]
        roll = n % 20
        if roll < 14:
            generated.append(line)
        elif roll < 16:
            generated.append("  " + line.strip() + "  ")
        elif roll < 18 and len(line) > 10:
            generated.append(line[:-2] + "x" + line[-1])  # one character changed: fuzzy
        else:
            generated.append(f"invented line number {n} that the tool never printed")
    return source, generated


def main() -> None:
    source, generated = make_case()
    timings = []
    for _ in range(20):
        started = time.perf_counter()
        mapping = map_lines_to_spans(generated, source)
        timings.append((time.perf_counter() - started) * 1000)
    print(f"mapping 300 generated lines onto 5,000 source lines: median {statistics.median(timings):.1f} ms, "
          f"max {max(timings):.1f} ms over {len(timings)} runs (target < 50 ms)")
    print(f"kept {len(mapping.line_numbers)} lines in {len(mapping.spans)} spans; fuzzy {mapping.fuzzy}; "
          f"unmatched {mapping.unmatched}")


if __name__ == "__main__":
    main()
