"""A small synthetic labelled set in the project's format, for smoke training runs and tests.

Deterministic (seeded) tool outputs of three shapes, pytest runs, grep hits and git logs, each with
a query whose answer is a known block of lines, plus negatives (the answer is not there). It is
learnable by a tiny model in a few dozen steps, which is what the CPU runs need; it is not a
substitute for the real data set (jobs/configs/qwen35_2b_lora.yaml reads that).

    python jobs/synthetic_data.py data/synthetic/train.jsonl --n 64
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any


def _pytest_example(rng: random.Random, i: int) -> tuple[str, str, list[str], tuple[int, int] | None]:
    n_tests = rng.randint(8, 20)
    failing = rng.randrange(n_tests)
    lines = ["============================= test session starts =============================",
             f"collected {n_tests} items", ""]
    for t in range(n_tests):
        lines.append(f"tests/test_mod{i % 7}.py::test_case_{t} {'FAILED' if t == failing else 'PASSED'}")
    lines += ["", "=================================== FAILURES ===================================",
              f"____________________________ test_case_{failing} ____________________________"]
    start = len(lines) + 1
    lines += [f"    def test_case_{failing}():",
              f">       assert parse('{i}') == {i + 1}",
              f"E       AssertionError: assert {i} == {i + 1}",
              f"tests/test_mod{i % 7}.py:{10 + failing}: AssertionError"]
    end = len(lines)
    lines += ["=========================== short test summary info ============================",
              f"FAILED tests/test_mod{i % 7}.py::test_case_{failing}", f"1 failed, {n_tests - 1} passed in 0.{i % 9}1s"]
    return "pytest", f"why does test_case_{failing} fail", lines, (start, end)


def _grep_example(rng: random.Random, i: int) -> tuple[str, str, list[str], tuple[int, int] | None]:
    symbol = f"handler_{i % 13}"
    lines = []
    hit = rng.randrange(4, 12)
    for k in range(rng.randint(hit + 2, 16)):
        if k == hit:
            lines.append(f"src/pkg/core_{i % 5}.py:{40 + k}:def {symbol}(request, timeout=30):")
        else:
            lines.append(f"src/pkg/util_{k}.py:{k * 3 + 1}:    result = {symbol}(req)  # call site {k}")
    return "grep", f"where is {symbol} defined", lines, (hit + 1, hit + 1)


def _git_log_example(rng: random.Random, i: int) -> tuple[str, str, list[str], tuple[int, int] | None]:
    lines: list[str] = []
    target = rng.randrange(3, 8)
    span = None
    for c in range(rng.randint(target + 1, 10)):
        start = len(lines) + 1
        message = f"Fix crash in config loader (#{100 + i})" if c == target else f"Update docs for module {c}"
        lines += [f"commit {rng.getrandbits(40):010x}", f"Author: Dev {c % 4} <dev{c % 4}@example.com>", "",
                  f"    {message}", ""]
        if c == target:
            span = (start, start + 3)
    return "git_log", "which commit fixed the config loader crash", lines, span


_SHAPES = (_pytest_example, _grep_example, _git_log_example)


def synthetic_rows(n: int, *, seed: int = 0, negative_every: int = 5, dev_fraction: float = 0.25,
                   filler_lines: int = 0) -> list[dict[str, Any]]:
    """``n`` labelled rows; every ``negative_every``-th asks about something absent (empty gold).

    ``filler_lines`` prepends that many irrelevant log lines to every output (long-context benchmarks).
    """
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        tool_type, query, lines, span = _SHAPES[i % len(_SHAPES)](rng, i)
        if filler_lines:
            lines = [f"[{k:06d}] DEBUG worker-{k % 7} heartbeat ok, queue depth {rng.randrange(100)}"
                     for k in range(filler_lines)] + lines
            span = (span[0] + filler_lines, span[1] + filler_lines) if span else None
        negative = negative_every > 0 and i % negative_every == negative_every - 1
        if negative:
            query, span = f"what does the output say about the database migration {i}", None
        group = f"synthetic-repo-{i % 8}"
        rows.append({
            "instance_id": f"synthetic-{i:04d}", "source": "synthetic_negative" if negative else "synthetic",
            "tool_type": tool_type, "query": query, "background_task": "", "tool_output": "\n".join(lines),
            "gold_spans": [{"start_line": span[0], "end_line": span[1]}] if span else [],
            "is_irrelevant": negative, "command": tool_type, "repo": group,
            # Split by repository group so dev never shares a repository with train.
            "split": "dev" if (i % 8) < round(8 * dev_fraction) else "train", "split_group_id": group,
        })
    return rows


def write_jsonl(rows: list[dict[str, Any]], path: str | Path) -> Path:
    from squeez_ray.io_utils import write_text_atomic

    write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in rows))
    return Path(path)


def write_synthetic(path: str | Path, n: int = 64, *, seed: int = 0, filler_lines: int = 0) -> Path:
    """``n`` rows of :func:`synthetic_rows` written to ``path`` (JSONL, atomically): jobs/synthetic_data.py."""
    return write_jsonl(synthetic_rows(n, seed=seed, filler_lines=filler_lines), path)
