"""A label file as the teacher: hand labels (``squeez_ray.label.hand.labels``) through the labelling pipeline.

``teacher.engine=file`` replaces the engine rounds with a lookup: each observation gets the label
rows written for it (its ``instance_id`` is the pool's ``output_id``), each becoming one example with
its own instance id (``<output_id>#<k>``, so two queries over one output are two examples). A label
that no longer fits its output (spans out of range: the output changed) is rejected and counted; an
observation with no label is left for a rerun, since a later label file may label it. A row of a
revision pass (``revisions``, "W") replaces the gold and difficulty of the row with its output and query,
which keeps its place (so its instance id) and says ``revised`` in its notes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from squeez_ray.spans import SpanError, normalize_spans, split_lines

NO_LABEL = "no_label"
INVALID_LABEL = "invalid_label"


@dataclass
class FileTeacherConfig:
    labels: list[str] = field(default_factory=list)  # label files (JSONL) or folders of them
    passes: list[str] = field(default_factory=lambda: ["A"])  # which labelling passes become examples
    revisions: list[str] = field(default_factory=lambda: ["W"])  # passes whose rows revise those examples' gold


def load_labels(config: FileTeacherConfig) -> dict[str, list[dict[str, Any]]]:
    """Label rows of the chosen passes by output_id, in file order (JSON text, so Ray ships plain data)."""
    from pathlib import Path

    from squeez_ray.label.hand.labels import example_key, label_files, read_label_rows
    from squeez_ray.schema import DataError

    for path in map(Path, config.labels):
        if not path.exists():
            raise DataError("label file does not exist", path=path)
    files = label_files(config.labels)
    by_output: dict[str, list[dict[str, Any]]] = {}
    revised: dict[tuple[str, str], dict[str, Any]] = {}
    for file in files:
        rows, problems = read_label_rows(file)
        if problems:
            raise DataError(str(problems[0]), path=file)
        for _, raw in rows:
            if raw.get("pass") in config.passes:
                by_output.setdefault(str(raw.get("output_id")), []).append(raw)
            elif raw.get("pass") in config.revisions:
                revised[example_key(raw)] = raw
    for rows in by_output.values():
        for k, raw in enumerate(rows):
            new = revised.get(example_key(raw))
            if new is not None and raw.get("pass") == "A":
                rows[k] = {**raw, "gold": new.get("gold"), "difficulty": new.get("difficulty"),
                           "revised": str(new.get("labeller"))}
    return by_output


def file_label(row: Mapping[str, Any], labels: Mapping[str, list[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """One working row per label of this observation, or one rejected row (no label, invalid label)."""
    from squeez_ray.label.stages import reject

    if row.get("reject_reason"):
        return [dict(row)]
    mine = labels.get(row["instance_id"], [])
    if not mine:
        return [reject(dict(row), NO_LABEL)]
    n_lines = len(split_lines(row["tool_output"]))
    out = []
    for k, label in enumerate(mine):
        try:
            spans = normalize_spans(label.get("gold") or [], n_lines, where=row["instance_id"])
        except SpanError as error:
            out.append(reject(dict(row), INVALID_LABEL, str(error)))
            continue
        notes = {key: label.get(key) for key in ("pass", "labeller", "difficulty")}
        if label.get("revised"):
            notes["revised"] = label["revised"]
        out.append({**row, "instance_id": f"{row['instance_id']}#{k}", "query": str(label.get("query", "")).strip(),
                    "spans": json.dumps([list(s) for s in spans]), "rule": "", "notes": json.dumps(notes)})
    return out
