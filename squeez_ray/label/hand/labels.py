"""Label files written by hand, and the checks every label row must pass before it is merged.

A label row (JSONL, one per example)::

    {"output_id": "...", "query": "...", "gold": [[start, end], ...], "difficulty": "easy",
     "pass": "A", "labeller": "..."}

``pass`` names the labelling pass that produced the row ("A": the first labelling, "B": the blind
second labelling used for agreement, "W": a revision whose gold replaces that of the pass-A row with
the same output and query, e.g. a narrow first gold widened to the evidence block, issue #35). The checks are LABELLING.md's: the output exists in the pool
and was not edited, a non-empty query that names no line number and does not quote the answer whole,
spans in range, sorted, disjoint and not touching, a negative has no gold and a positive has some,
gold at most half of the output, outputs of at least 5 lines, no duplicate example, at most four
examples of one output per pass.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from squeez_ray.spans import split_lines

DIFFICULTIES = ("easy", "medium", "semantic", "negative")
MAX_QUERY_CHARS = 300
MIN_OUTPUT_LINES = 5
MAX_GOLD_SHARE = 0.5
REVISION_PASSES = ("W",)  # a row of these passes revises the pass-A row of its output and query
MAX_EXAMPLES_PER_OUTPUT = 4  # per pass: more would let one output dominate its source; fewer leaves
# too few queries over one output's look-alike blocks to teach localisation (issue #23)
# "line 12", "lines 3-4", "L12", "foo.py:12": a query never points at a position in the output.
_LINE_NUMBER = re.compile(r"\blines?\s*#?\d+|\bL\d+\b|\b[\w-]+\.\w{1,6}:\d+\b", re.IGNORECASE)


@dataclass(frozen=True)
class LabelProblem:
    path: str
    row: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: row {self.row}: field {self.field!r}: {self.message}"


def example_key(raw: Mapping[str, Any]) -> tuple[str, str]:
    """What names one example across passes: its output and its query (case and spacing aside)."""
    return str(raw.get("output_id")), " ".join(str(raw.get("query", "")).lower().split())


def label_files(paths: Iterable[str | Path]) -> list[Path]:
    """Label files named directly or as folders of ``*.jsonl`` (sorted within a folder)."""
    files: list[Path] = []
    for path in map(Path, paths):
        files += sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    return files


def read_label_rows(path: str | Path) -> tuple[list[tuple[int, dict[str, Any]]], list[LabelProblem]]:
    """(row number, row) pairs of a JSONL label file, and the rows that are not JSON objects."""
    rows: list[tuple[int, dict[str, Any]]] = []
    problems: list[LabelProblem] = []
    with Path(path).open(encoding="utf-8") as handle:
        for index, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError as error:
                problems.append(LabelProblem(str(path), index, "<row>", f"not valid JSON ({error.msg})"))
                continue
            if not isinstance(raw, dict):
                problems.append(LabelProblem(str(path), index, "<row>", "not a JSON object"))
                continue
            rows.append((index, raw))
    return rows, problems


def _spans(gold: Any) -> list[tuple[int, int]] | str:
    if not isinstance(gold, list):
        return "must be a list of [start, end] pairs"
    spans = []
    for pair in gold:
        if (not isinstance(pair, (list, tuple)) or len(pair) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in pair)):
            return f"{pair!r} is not a [start, end] pair of integers"
        spans.append((pair[0], pair[1]))
    return spans


def check_label(raw: Mapping[str, Any], pool: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(field, message) for each problem of one label row; empty when the row is good."""
    problems: list[tuple[str, str]] = []
    output = pool.get(raw.get("output_id"))  # type: ignore[arg-type]
    if output is None:
        return [("output_id", f"{raw.get('output_id')!r} is not an output of the pool")]
    lines = split_lines(output["tool_output"])
    n = len(lines)
    if n < MIN_OUTPUT_LINES:
        problems.append(("output_id", f"the output has {n} lines; examples need at least {MIN_OUTPUT_LINES}"))
    query = raw.get("query")
    if not isinstance(query, str) or not query.strip():
        problems.append(("query", "is empty"))
        query = ""
    elif len(query) > MAX_QUERY_CHARS:
        problems.append(("query", f"is {len(query)} characters (at most {MAX_QUERY_CHARS})"))
    if query and _LINE_NUMBER.search(query):
        problems.append(("query", f"names a line number ({_LINE_NUMBER.search(query).group(0)!r})"))
    for name in ("pass", "labeller"):
        if not isinstance(raw.get(name), str) or not raw[name].strip():
            problems.append((name, "is missing (say which labelling pass and labeller wrote the row)"))
    difficulty = raw.get("difficulty")
    if difficulty not in DIFFICULTIES:
        problems.append(("difficulty", f"{difficulty!r} is not one of {', '.join(DIFFICULTIES)}"))
    spans = _spans(raw.get("gold"))
    if isinstance(spans, str):
        return problems + [("gold", spans)]
    previous_end = 0
    for start, end in spans:
        if not 1 <= start <= end <= n:
            problems.append(("gold", f"span [{start}, {end}] is out of range (1..{n})"))
        elif start <= previous_end + 1 and previous_end:
            problems.append(("gold", f"span [{start}, {end}] is not after the previous one with a gap "
                                     "(sorted, disjoint, not touching: merge touching spans)"))
        previous_end = max(previous_end, end)
    kept = sum(end - start + 1 for start, end in spans)
    if difficulty == "negative" and spans:
        problems.append(("gold", "a negative has no gold lines"))
    if difficulty in DIFFICULTIES[:3] and not spans:
        problems.append(("gold", "a positive needs gold lines (or mark it difficulty 'negative')"))
    if kept > MAX_GOLD_SHARE * n:
        problems.append(("gold", f"keeps {kept} of {n} lines: more than half the output teaches no pruning"))
    if query and spans and not problems:
        whole = [lines[i - 1].strip() for s, e in spans for i in range(s, e + 1) if len(lines[i - 1].strip()) >= 40]
        if any(line in query for line in whole):
            problems.append(("query", "quotes a gold line whole: ask for it, do not paste it"))
    return problems


def check_label_files(paths: Iterable[str | Path], pool: Mapping[str, Mapping[str, Any]], *,
                      reference: Iterable[Mapping[str, Any]] = ()) -> tuple[list[dict[str, Any]], list[LabelProblem]]:
    """Good label rows (each tagged with its file) and every problem found, over all files at once.

    A revision row (``REVISION_PASSES``) must name a good pass-A row of these files or of ``reference``
    (pass-A rows of label files not being checked), by output and query."""
    good: list[dict[str, Any]] = []
    problems: list[LabelProblem] = []
    targets = {example_key(r) for r in reference if r.get("pass") == "A"}
    revisions: list[tuple[Path, int, dict[str, Any], list[tuple[str, str]]]] = []
    seen: dict[tuple[str, str, str], str] = {}
    per_output: dict[tuple[str, str], int] = {}
    for path in paths:
        rows, bad = read_label_rows(path)
        problems += bad
        for index, raw in rows:
            found = check_label(raw, pool)
            key = (str(raw.get("output_id")), str(raw.get("query", "")).strip().lower(), str(raw.get("pass")))
            if key in seen:
                found.append(("query", f"duplicates an example of {seen[key]} (same output, query and pass)"))
            seen.setdefault(key, f"{path} row {index}")
            count_key = (key[0], key[2])
            per_output[count_key] = per_output.get(count_key, 0) + 1
            if per_output[count_key] > MAX_EXAMPLES_PER_OUTPUT:
                found.append(("output_id", f"example {MAX_EXAMPLES_PER_OUTPUT + 1} of this output in pass "
                                           f"{key[2]} (at most {MAX_EXAMPLES_PER_OUTPUT})"))
            if raw.get("pass") in REVISION_PASSES:
                revisions.append((Path(path), index, raw, found))
                continue
            if found:
                problems += [LabelProblem(str(path), index, f, m) for f, m in found]
            else:
                good.append({**raw, "query": raw["query"].strip(), "label_file": Path(path).name})
                if raw.get("pass") == "A":
                    targets.add(example_key(raw))
    for path, index, raw, found in revisions:
        if example_key(raw) not in targets:
            found.append(("query", f"pass {raw.get('pass')} revises a pass-A example, and no good pass-A row "
                                   "has this output_id and query"))
        if found:
            problems += [LabelProblem(str(path), index, f, m) for f, m in found]
        else:
            good.append({**raw, "query": raw["query"].strip(), "label_file": path.name})
    return good, problems
