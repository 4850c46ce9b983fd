"""The data contracts of DESIGN.md: Arrow schemas, the one error type, and per-row checks.

Every reader funnels rows through ``check_example`` / ``check_observation``, so a row is either a
clean canonical dict or a ``DataError`` that names the file, the row and the field.
"""

from __future__ import annotations

import bisect
import logging
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from squeez_ray.spans import SpanError, normalize_spans, split_lines

log = logging.getLogger(__name__)


class DataError(ValueError):
    """Bad input data. The message starts with ``file: row N (instance_id): field 'x':`` so a user
    can go straight to the problem; ``path``, ``row`` and ``field`` hold the same for code."""

    def __init__(self, message: str, *, path: str | Path | None = None, row: int | None = None,
                 field: str | None = None, instance_id: Any = None):
        self.path, self.row, self.field, self.detail = path, row, field, message
        parts = [str(path) if path is not None else "<rows>"]
        if row is not None:
            parts.append(f"row {row}" + (f" (instance_id {instance_id!r})" if instance_id is not None else ""))
        if field is not None:
            parts.append(f"field {field!r}")
        super().__init__(": ".join(parts + [message]))


SPAN_TYPE = pa.struct([("start_line", pa.int32()), ("end_line", pa.int32())])

# A labelled example (DESIGN.md "Labelled example"), compatible with the released Squeez rows.
# ``notes`` is ours: the cases format carries a free-text note per case and we keep it for export.
LABELLED_SCHEMA = pa.schema([
    pa.field("instance_id", pa.string(), nullable=False),
    pa.field("source", pa.string(), nullable=False),
    pa.field("tool_type", pa.string(), nullable=False),
    pa.field("query", pa.string(), nullable=False),
    pa.field("background_task", pa.string()),
    pa.field("tool_output", pa.string(), nullable=False),
    pa.field("gold_spans", pa.list_(SPAN_TYPE), nullable=False),
    pa.field("is_irrelevant", pa.bool_(), nullable=False),
    pa.field("command", pa.string()),
    pa.field("repo", pa.string()),
    pa.field("split", pa.string()),
    pa.field("split_group_id", pa.string()),
    pa.field("notes", pa.string()),
])

# A raw observation: one tool run (DESIGN.md "Raw observation"). ``command`` is stored as text: an
# argv list is written with shlex.join, so shlex.split gives the exact argv back.
OBSERVATION_SCHEMA = pa.schema([
    pa.field("instance_id", pa.string(), nullable=False),
    pa.field("repo", pa.string()),
    pa.field("base_commit", pa.string()),
    pa.field("tool_type", pa.string(), nullable=False),
    pa.field("command", pa.string(), nullable=False),
    pa.field("exit_code", pa.int32()),
    pa.field("duration_s", pa.float64()),
    pa.field("tool_output", pa.string(), nullable=False),
    pa.field("truncated", pa.bool_(), nullable=False),
    pa.field("error", pa.string()),
])

LABELLED_FIELDS = tuple(LABELLED_SCHEMA.names)
OBSERVATION_FIELDS = tuple(OBSERVATION_SCHEMA.names)


class RowChecker:
    """Checks one row's fields, raising a DataError that says where (file, row, instance_id, field)."""

    def __init__(self, raw: Mapping[str, Any], path: str | Path | None, row: int | None):
        self.raw, self.path, self.row = raw, path, row
        iid = raw.get("instance_id")
        self.instance_id = iid if isinstance(iid, str) else None

    def error(self, field: str | None, message: str) -> DataError:
        return DataError(message, path=self.path, row=self.row, field=field, instance_id=self.instance_id)

    def text(self, field: str, *, required: bool = True, default: str | None = None) -> str | None:
        value = self.raw.get(field)
        if value is None:
            if required and default is None:
                raise self.error(field, "is missing (required)" if field not in self.raw else "is null (required)")
            return default
        if not isinstance(value, str):
            raise self.error(field, f"expected text, got {type(value).__name__} {_short(value)}")
        return self.utf8(field, value)

    def utf8(self, field: str, value: str) -> str:
        # Lone surrogates come from undecodable bytes (read with surrogateescape) or from JSON "\udXXX"
        # escapes; Arrow and every tokenizer reject them, so they are an input error, never dropped.
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as error:
            line = value.count("\n", 0, error.start) + 1
            raise self.error(field, f"holds bytes that are not valid UTF-8 (line {line} of the field, "
                                    f"character {error.start}: {value[error.start:error.end]!r})") from None
        return value

    def boolean(self, field: str, default: bool | None = None) -> bool | None:
        value = self.raw.get(field)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(field, f"expected true or false, got {type(value).__name__} {_short(value)}")
        return value

    def integer(self, field: str) -> int | None:
        value = self.raw.get(field)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(field, f"expected an integer, got {type(value).__name__} {_short(value)}")
        return value

    def number(self, field: str) -> float | None:
        value = self.raw.get(field)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(field, f"expected a number, got {type(value).__name__} {_short(value)}")
        return float(value)

    def command(self, field: str = "command", *, required: bool = False) -> str | None:
        value = self.raw.get(field)
        if isinstance(value, (list, tuple)):
            if not all(isinstance(part, str) for part in value):
                raise self.error(field, f"an argv list must hold only text, got {_short(value)}")
            return self.utf8(field, shlex.join(value))
        return self.text(field, required=required)

    def spans(self, field: str, tool_output: str) -> list[dict[str, int]]:
        value = self.raw.get(field)
        if value is None:
            raise self.error(field, "is missing (required; use [] for a negative)")
        if not isinstance(value, (list, tuple)):
            raise self.error(field, f"expected a list of spans, got {type(value).__name__} {_short(value)}")
        for span in value:
            parts = (span.get("start_line"), span.get("end_line")) if isinstance(span, Mapping) else span
            # bools are ints in Python, and "3" or 3.0 would pass int(); all are typos, not line numbers
            if not (isinstance(parts, (list, tuple)) and len(parts) == 2
                    and all(isinstance(p, int) and not isinstance(p, bool) for p in parts)):
                raise self.error(field, f"span {_short(span)} is not a [start_line, end_line] pair of integers "
                                        "(or a {start_line, end_line} object)")
        try:
            spans = normalize_spans(value, len(split_lines(tool_output)))
        except SpanError as error:
            raise self.error(field, str(error)) from None
        return [{"start_line": s, "end_line": e} for s, e in spans]


def check_example(raw: Mapping[str, Any], *, path: str | Path | None = None, row: int | None = None,
                  defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One canonical labelled row from ``raw`` (extra keys ignored), or a DataError saying what is wrong.

    ``defaults`` fill fields the input lacks (an importer's ``source``, for example).
    """
    if not isinstance(raw, Mapping):
        raise DataError(f"expected an object with fields, got {type(raw).__name__} {_short(raw)}", path=path, row=row)
    if defaults:
        raw = {**defaults, **{k: v for k, v in raw.items() if v is not None}}
    c = RowChecker(raw, path, row)
    tool_output = c.text("tool_output")
    gold_spans = c.spans("gold_spans", tool_output)
    is_irrelevant = c.boolean("is_irrelevant", default=not gold_spans)
    if is_irrelevant and gold_spans:
        raise c.error("is_irrelevant", f"is true but gold_spans holds {len(gold_spans)} span(s); a negative has none")
    return {
        "instance_id": c.text("instance_id"),
        "source": c.text("source", default="unknown"),
        "tool_type": c.text("tool_type"),
        "query": c.text("query"),
        "background_task": c.text("background_task", required=False),
        "tool_output": tool_output,
        "gold_spans": gold_spans,
        "is_irrelevant": is_irrelevant,
        "command": c.command(),
        "repo": c.text("repo", required=False),
        "split": c.text("split", required=False),
        "split_group_id": c.text("split_group_id", required=False),
        "notes": c.text("notes", required=False),
    }


def check_observation(raw: Mapping[str, Any], *, path: str | Path | None = None, row: int | None = None) -> dict[str, Any]:
    """One canonical raw-observation row, or a DataError."""
    if not isinstance(raw, Mapping):
        raise DataError(f"expected an object with fields, got {type(raw).__name__} {_short(raw)}", path=path, row=row)
    c = RowChecker(raw, path, row)
    return {
        "instance_id": c.text("instance_id"),
        "repo": c.text("repo", required=False),
        "base_commit": c.text("base_commit", required=False),
        "tool_type": c.text("tool_type"),
        "command": c.command(required=True),
        "exit_code": c.integer("exit_code"),
        "duration_s": c.number("duration_s"),
        "tool_output": c.text("tool_output"),
        "truncated": c.boolean("truncated", default=False),
        "error": c.text("error", required=False),
    }


def warn_ignored_columns(columns: set[str], known: tuple[str, ...], path: str | Path | None) -> None:
    extra = sorted(columns - set(known))
    if extra:
        log.warning("%s: ignoring columns not in the contract: %s", path or "<rows>", ", ".join(extra))


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def locate_lines(target: Sequence[str], source: Sequence[str], checker: RowChecker, *,
                 field: str = "response") -> list[int]:
    """1-based source line numbers of the target lines, each found after the previous one.

    Earliest match first (which finds a match whenever one exists in order); a line that differs
    only in trailing whitespace is accepted because some exports strip it. Anything else is an error:
    a target line that is not in the source would make the label a lie.
    """
    exact: dict[str, list[int]] = {}
    loose: dict[str, list[int]] = {}
    for i, line in enumerate(source):
        exact.setdefault(line, []).append(i)
        loose.setdefault(line.rstrip(), []).append(i)
    found: list[int] = []
    previous = -1
    for k, line in enumerate(target, 1):
        index = _first_after(exact.get(line), previous)
        if index is None:
            index = _first_after(loose.get(line.rstrip()), previous)
        if index is None:
            where = f"after source line {previous + 1}" if previous >= 0 else "anywhere"
            raise checker.error(field, f"target line {k} {line[:80]!r} is not a line of the tool output "
                                            f"({where}); targets must copy source lines verbatim and in order")
        found.append(index + 1)
        previous = index
    return found


def _first_after(positions: list[int] | None, previous: int) -> int | None:
    if not positions:
        return None
    at = bisect.bisect_right(positions, previous)
    return positions[at] if at < len(positions) else None
