"""Row functions of the labelling pipeline, engine-independent and pure (dict in, dict out).

A row moves through: ``prepare`` (observation -> working row) -> ``query_request`` / engine /
``take_query`` -> ``spans_request`` / engine / ``take_spans`` -> (for positives with no spans)
``spans_request(retry=True)`` / engine / ``take_spans(retry=True)`` -> ``to_example``. The rule
teacher replaces the three engine rounds with ``rule_label``. A row that fails anywhere carries
``reject_reason`` and is counted, never silently lost.

Working columns are plain scalars (JSON text for messages and spans) so Ray Data moves them as
Arrow strings without nested-type surprises.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from squeez_ray.label import parse, prompts
from squeez_ray.label.rules import RuleLabel, label_with_rules
from squeez_ray.spans import split_lines

# Reasons a row is dropped before any teacher call.
OBSERVATION_ERROR = "observation_error"  # the tool did not run normally (timeout, not started)
EMPTY_OUTPUT = "empty_output"
OUTPUT_TOO_LONG = "output_too_long"

WORKING_DEFAULTS: dict[str, Any] = {
    "query": "", "spans": "", "reject_reason": "", "reject_detail": "", "teacher_request": "",
    "teacher_reply": "", "teacher_error": "", "teacher_error_detail": "", "teacher_requests": 0, "retried": False,
    "rule": "", "notes": "",
}


@dataclass
class StageSettings:
    max_query_chars: int = 300
    max_output_lines: int = 2000  # longer outputs are skipped (and counted) before spending requests
    skip_errored: bool = True  # drop observations whose run timed out or never started


def prepare(observation: Mapping[str, Any], settings: StageSettings) -> dict[str, Any]:
    """An observation as a working row: the contract fields, a task text, empty working columns."""
    row = {
        "instance_id": observation["instance_id"],
        "repo": observation.get("repo") or "",
        "tool_type": observation["tool_type"],
        "command": observation.get("command") or "",
        "tool_output": observation.get("tool_output") or "",
        "background_task": observation.get("background_task") or observation.get("problem_statement") or "",
        **WORKING_DEFAULTS,
    }
    if settings.skip_errored and observation.get("error"):
        return reject(row, OBSERVATION_ERROR, str(observation["error"])[:200])
    if not row["tool_output"].strip():
        return reject(row, EMPTY_OUTPUT)
    n = len(split_lines(row["tool_output"]))
    if n > settings.max_output_lines:
        return reject(row, OUTPUT_TOO_LONG, f"{n} > {settings.max_output_lines} lines")
    return row


def reject(row: dict[str, Any], reason: str, detail: str = "") -> dict[str, Any]:
    return {**row, "reject_reason": reason, "reject_detail": detail, "teacher_request": ""}


def query_request(row: dict[str, Any], settings: StageSettings) -> dict[str, Any]:
    messages = prompts.query_messages(row["background_task"], row["tool_type"], row["command"], row["tool_output"],
                                      settings.max_query_chars)
    return {**row, "teacher_request": json.dumps(messages)}


def _transport_failure(row: dict[str, Any]) -> dict[str, Any] | None:
    if row.get("teacher_error"):
        return reject(row, row["teacher_error"], row.get("teacher_error_detail", ""))
    return None


def take_query(row: dict[str, Any], settings: StageSettings) -> dict[str, Any]:
    failed = _transport_failure(row)
    if failed:
        return failed
    result = parse.parse_query_reply(row["teacher_reply"], settings.max_query_chars)
    if isinstance(result, parse.Rejection):
        return reject(row, result.reason, result.detail)
    return {**row, "query": result.query, "teacher_request": "", "teacher_reply": ""}


def spans_request(row: dict[str, Any], retry: bool = False) -> dict[str, Any]:
    build = prompts.retry_messages if retry else prompts.spans_messages
    messages = build(row["query"], row["tool_type"], row["command"], row["tool_output"])
    return {**row, "teacher_request": json.dumps(messages), "retried": retry or row.get("retried", False)}


def take_spans(row: dict[str, Any]) -> dict[str, Any]:
    """Every row here is a positive (the query was written for this output), so no spans is a rejection."""
    failed = _transport_failure(row)
    if failed:
        return failed
    n_lines = len(split_lines(row["tool_output"]))
    result = parse.parse_spans_reply(row["teacher_reply"], n_lines, positive=True)
    if isinstance(result, parse.Rejection):
        return reject(row, result.reason, result.detail)
    return {**row, "spans": json.dumps([list(s) for s in result.spans]), "teacher_request": "", "teacher_reply": ""}


def needs_retry(row: Mapping[str, Any]) -> bool:
    return row.get("reject_reason") == parse.EMPTY_SPANS and not row.get("retried")


def clear_rejection(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "reject_reason": "", "reject_detail": ""}


def rule_label(row: dict[str, Any]) -> dict[str, Any]:
    """The rule teacher in place of the three engine rounds."""
    if row.get("reject_reason"):
        return row
    result = label_with_rules(row)
    if not isinstance(result, RuleLabel):
        return reject(row, result.reason, result.detail)
    return {**row, "query": result.query, "spans": json.dumps([list(s) for s in result.spans]), "rule": result.rule}


def to_example(row: Mapping[str, Any], source: str) -> dict[str, Any]:
    """A labelled example (the schema's canonical row) from a row that passed every stage."""
    spans = json.loads(row["spans"]) if row.get("spans") else []
    return {
        "instance_id": row["instance_id"],
        "source": source,
        "tool_type": row["tool_type"],
        "query": row["query"],
        "background_task": row.get("background_task") or None,
        "tool_output": row["tool_output"],
        "gold_spans": [{"start_line": s, "end_line": e} for s, e in spans],
        "is_irrelevant": not spans,
        "command": row.get("command") or None,
        "repo": row.get("repo") or None,
        "split": None,
        "split_group_id": None,
        "notes": row.get("notes") or None,  # the file teacher records pass, labeller and difficulty here
    }
