"""Cut the pool's unlabelled outputs into batches a labeller can read in one sitting.

Batches mix families and sources (seeded shuffle) and are bounded by outputs and by total lines, so a
batch with long outputs holds fewer of them. Each batch is a text file (``render_batch``) and a JSON
file with its output ids, the labeller's checklist.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from squeez_ray.label.hand.render import render_batch
from squeez_ray.io_utils import write_text_atomic


def plan_batches(rows: Iterable[Mapping[str, Any]], *, max_outputs: int = 40, max_lines: int = 8000,
                 seed: int = 0) -> list[list[Mapping[str, Any]]]:
    rows = sorted(rows, key=lambda r: r["output_id"])
    random.Random(seed).shuffle(rows)
    batches: list[list[Mapping[str, Any]]] = []
    current: list[Mapping[str, Any]] = []
    lines = 0
    for row in rows:
        n = row["tool_output"].count("\n") + 1
        if current and (len(current) >= max_outputs or lines + n > max_lines):
            batches.append(current)
            current, lines = [], 0
        current.append(row)
        lines += n
    if current:
        batches.append(current)
    return batches


def blind_sample(labels: Iterable[Mapping[str, Any]], pool: Mapping[str, Mapping[str, Any]], count: int,
                 seed: int = 0) -> dict[str, list[str]]:
    """``count`` pass-A examples for a blind second labelling, spread over families (round robin over a
    seeded shuffle); returns output_id -> the queries to answer."""
    by_family: dict[str, list[Mapping[str, Any]]] = {}
    for row in sorted(labels, key=lambda r: (r["output_id"], r["query"])):
        if row.get("pass") == "A" and row["output_id"] in pool:
            by_family.setdefault(pool[row["output_id"]]["family"], []).append(row)
    rng = random.Random(seed)
    for rows in by_family.values():
        rng.shuffle(rows)
    chosen: dict[str, list[str]] = {}
    taken = 0
    while taken < count and any(by_family.values()):
        for family in sorted(by_family):
            if by_family[family] and taken < count:
                row = by_family[family].pop()
                chosen.setdefault(row["output_id"], []).append(row["query"])
                taken += 1
    return chosen


def write_batches(batches: list[list[Mapping[str, Any]]], out: str | Path, *, first: int = 1,
                  queries: Mapping[str, list[str]] | None = None, prefix: str = "batch",
                  second: bool = False) -> list[Path]:
    out = Path(out)
    written = []
    for number, rows in enumerate(batches, start=first):
        name = f"{prefix}-{number:03d}"
        write_text_atomic(out / f"{name}.txt", render_batch(rows, title=name, queries=queries, second=second))
        write_text_atomic(out / f"{name}.json", json.dumps(
            {"batch": name, "output_ids": [r["output_id"] for r in rows],
             "lines": sum(r["tool_output"].count("\n") + 1 for r in rows)}, indent=1) + "\n")
        written.append(out / f"{name}.txt")
    return written
