"""The released encoder rows: ``task``, ``tool_output``, ``relevant_lines`` (the kept lines as text).

The rows hold no line numbers, so positions are recovered by matching the relevant lines, in order,
against the output's lines (``contracts.locate_lines``: exact first, then ignoring trailing
whitespace). Repeated lines can leave a position open: a line is *ambiguous* when the earliest and
the latest in-order placement differ (every valid placement lies between them, so equal means
certain). The earliest placement is kept and the ambiguous lines are counted, never hidden.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from squeez_ray.schema.contracts import RowChecker, check_example, locate_lines
from squeez_ray.spans import kept_text, split_lines

ENCODER_COLUMNS = frozenset({"task", "tool_output", "relevant_lines"})


def from_encoder_row(raw: Mapping[str, Any], *, path: str | Path | None, row: int) -> tuple[dict[str, Any], int]:
    """(one checked canonical row, how many of its relevant lines have an ambiguous position)."""
    iid = raw.get("instance_id", raw.get("id"))
    c = RowChecker({**raw, "instance_id": iid if isinstance(iid, str) else None}, path, row)
    task = c.text("task")
    if not task.strip():
        raise c.error("task", "is empty (the query the lines were chosen for)")
    tool_output = c.text("tool_output")
    kept = _relevant_lines(raw.get("relevant_lines"), c)
    lines = split_lines(tool_output)
    earliest = locate_lines(kept, lines, c, field="relevant_lines")
    latest = _latest_positions(kept, lines, c)
    ambiguous = sum(1 for a, b in zip(earliest, latest) if a != b)
    example = check_example({
        "instance_id": iid if iid is not None else f"row-{row}", "source": raw.get("source") or "squeez-encoder",
        "tool_type": raw.get("tool_type") or "unknown", "query": task, "tool_output": tool_output,
        "gold_spans": [[n, n] for n in earliest], "command": raw.get("command"), "repo": raw.get("repo"),
        "split": raw.get("split"),
    }, path=path, row=row)
    return example, ambiguous


def _relevant_lines(value: Any, c: RowChecker) -> list[str]:
    if isinstance(value, str):  # one text block: its lines (an empty text is a negative)
        return split_lines(value) if value.strip() else []
    if not isinstance(value, list):
        raise c.error("relevant_lines", f"expected a list of lines or a text, got {type(value).__name__}")
    out: list[str] = []
    for k, item in enumerate(value, 1):
        if not isinstance(item, str):
            raise c.error("relevant_lines", f"item {k} is {type(item).__name__}, expected a line of text")
        out.extend(split_lines(c.utf8("relevant_lines", item)))  # an item holding a block counts line by line
    return out


def _latest_positions(target: Sequence[str], source: Sequence[str], c: RowChecker) -> list[int]:
    """1-based positions of the latest in-order placement (the earliest one of the reversed lists)."""
    n = len(source)
    reversed_positions = locate_lines(list(reversed(target)), list(reversed(source)), c, field="relevant_lines")
    return [n + 1 - p for p in reversed(reversed_positions)]


def to_encoder_row(example: Mapping[str, Any]) -> dict[str, Any]:
    """A canonical row as a released encoder row (the kept lines as text, in order)."""
    lines = split_lines(example["tool_output"])
    spans = [(s["start_line"], s["end_line"]) for s in example["gold_spans"]]
    kept = kept_text(lines, spans).split("\n") if spans else []
    return {"id": example["instance_id"], "task": example["query"], "tool_output": example["tool_output"],
            "relevant_lines": kept, "tool_type": example.get("tool_type")}
