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

from squeez_ray.handlabel.render import render_batch
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


def write_batches(batches: list[list[Mapping[str, Any]]], out: str | Path, *, first: int = 1) -> list[Path]:
    out = Path(out)
    written = []
    for number, rows in enumerate(batches, start=first):
        name = f"batch-{number:03d}"
        write_text_atomic(out / f"{name}.txt", render_batch(rows, title=name))
        write_text_atomic(out / f"{name}.json", json.dumps(
            {"batch": name, "output_ids": [r["output_id"] for r in rows],
             "lines": sum(r["tool_output"].count("\n") + 1 for r in rows)}, indent=1) + "\n")
        written.append(out / f"{name}.txt")
    return written
