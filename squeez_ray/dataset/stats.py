"""Per-family statistics of a built dataset (a family is a tool type, or a synthetic family)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from squeez_ray.spans import count_lines, split_lines

SYNTH_PREFIX = "synth:"  # synthetic instance ids are synth:<family>:<n>


def family_of(example: Mapping[str, Any]) -> str:
    instance_id = str(example.get("instance_id") or "")
    if instance_id.startswith(SYNTH_PREFIX):
        return "synth/" + instance_id.split(":")[1]
    return str(example.get("tool_type"))


def family_table(examples: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = defaultdict(lambda: {"examples": 0, "negatives": 0, "train": 0, "dev": 0,
                                                            "test": 0, "_lines": 0, "_gold": 0, "_share": 0.0})
    for example in examples:
        row = rows[family_of(example)]
        n = len(split_lines(example["tool_output"]))
        row["examples"] += 1
        row[example.get("split") or "train"] += 1
        row["_lines"] += n
        if example.get("is_irrelevant"):
            row["negatives"] += 1
        else:
            gold = count_lines((s["start_line"], s["end_line"]) for s in example["gold_spans"])
            row["_gold"] += gold
            row["_share"] += gold / n
    table = []
    for family in sorted(rows):
        row = rows[family]
        positives = row["examples"] - row["negatives"]
        table.append({
            "family": family, "examples": row["examples"], "negatives": row["negatives"],
            "train": row["train"], "dev": row["dev"], "test": row["test"],
            "mean_output_lines": round(row["_lines"] / row["examples"], 1),
            "mean_gold_lines": round(row["_gold"] / positives, 1) if positives else 0.0,
            "mean_relevant_share": round(row["_share"] / positives, 3) if positives else 0.0,
        })
    return table


def to_markdown(table: list[dict[str, Any]], title: str = "Examples per family") -> str:
    if not table:
        return f"# {title}\n\n(no examples)\n"
    columns = list(table[0])
    lines = [f"# {title}", "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(row[c]) for c in columns) + " |" for row in table]
    total = {c: sum(row[c] for row in table) for c in ("examples", "negatives", "train", "dev", "test")}
    lines += ["", "Total: " + ", ".join(f"{k} {v}" for k, v in total.items()), ""]
    return "\n".join(lines)
