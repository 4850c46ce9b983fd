"""Teacher replies -> labels, as pure functions.

Every malformed reply maps to a named rejection reason (the constants below) so a labelling run can
say how many rows it lost and why, instead of failing or silently dropping them. Tolerated on the
way in: code fences, a ``<think>`` block, and prose around one JSON object (teachers add these).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from squeez_ray.spans import Span, normalize_spans

# Rejection reasons (stable strings: they are manifest keys and test expectations).
EMPTY_REPLY = "empty_reply"
INVALID_JSON = "invalid_json"
NOT_AN_OBJECT = "not_an_object"
MISSING_QUERY = "missing_query"
QUERY_NOT_STRING = "query_not_string"
EMPTY_QUERY = "empty_query"
QUERY_TOO_LONG = "query_too_long"
MISSING_SPANS = "missing_spans"
SPANS_NOT_LIST = "spans_not_list"
SPAN_MALFORMED = "span_malformed"
SPAN_NOT_INTEGER = "span_not_integer"
SPAN_REVERSED = "span_reversed"
SPAN_OUT_OF_RANGE = "span_out_of_range"
EMPTY_SPANS = "empty_spans"
MISSING_OUTPUT = "missing_output"
OUTPUT_TOO_SHORT = "output_too_short"

REASONS = (EMPTY_REPLY, INVALID_JSON, NOT_AN_OBJECT, MISSING_QUERY, QUERY_NOT_STRING, EMPTY_QUERY, QUERY_TOO_LONG,
           MISSING_SPANS, SPANS_NOT_LIST, SPAN_MALFORMED, SPAN_NOT_INTEGER, SPAN_REVERSED, SPAN_OUT_OF_RANGE,
           EMPTY_SPANS, MISSING_OUTPUT, OUTPUT_TOO_SHORT)


@dataclass(frozen=True)
class Rejection:
    reason: str  # one of REASONS (or a transport reason from the engines, e.g. "http_error")
    detail: str = ""


@dataclass(frozen=True)
class QueryReply:
    query: str


@dataclass(frozen=True)
class SpansReply:
    spans: list[Span]  # normalised: sorted, merged, within 1..n_lines


@dataclass(frozen=True)
class SynthReply:
    command: str
    tool_output: str


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```$", re.DOTALL)


def _json_object(reply: Any) -> dict | Rejection:
    if not isinstance(reply, str) or not reply.strip():
        return Rejection(EMPTY_REPLY)
    text = _THINK.sub("", reply).strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        data = json.loads(text)
    except ValueError:
        # Prose around the object: take the outermost braces once, never guess further.
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            return Rejection(INVALID_JSON, text[:80])
        try:
            data = json.loads(text[start:end + 1])
        except ValueError:
            return Rejection(INVALID_JSON, text[:80])
    if not isinstance(data, dict):
        return Rejection(NOT_AN_OBJECT, type(data).__name__)
    return data


def parse_query_reply(reply: Any, max_query_chars: int = 300) -> QueryReply | Rejection:
    data = _json_object(reply)
    if isinstance(data, Rejection):
        return data
    if "query" not in data:
        return Rejection(MISSING_QUERY, f"keys: {sorted(data)}")
    query = data["query"]
    if not isinstance(query, str):
        return Rejection(QUERY_NOT_STRING, type(query).__name__)
    query = " ".join(query.split())  # one line: the prompt contract puts it inside <query> tags
    if not query:
        return Rejection(EMPTY_QUERY)
    if len(query) > max_query_chars:
        return Rejection(QUERY_TOO_LONG, f"{len(query)} > {max_query_chars} characters")
    return QueryReply(query)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_spans_reply(reply: Any, n_lines: int, *, positive: bool = True) -> SpansReply | Rejection:
    """Spans as ``[[s, e], ...]`` or ``[{"start_line": s, "end_line": e}, ...]``; a bare ``[n]`` is one line."""
    data = _json_object(reply)
    if isinstance(data, Rejection):
        return data
    if "spans" not in data:
        return Rejection(MISSING_SPANS, f"keys: {sorted(data)}")
    raw = data["spans"]
    if not isinstance(raw, list):
        return Rejection(SPANS_NOT_LIST, type(raw).__name__)
    pairs: list[tuple[int, int]] = []
    for item in raw:
        if isinstance(item, dict):
            if "start_line" not in item or "end_line" not in item:
                return Rejection(SPAN_MALFORMED, repr(item)[:80])
            pair = [item["start_line"], item["end_line"]]
        elif isinstance(item, list) and len(item) in (1, 2):
            pair = [item[0], item[-1]]
        elif _is_int(item):
            pair = [item, item]
        else:
            return Rejection(SPAN_MALFORMED, repr(item)[:80])
        if not all(_is_int(v) for v in pair):
            return Rejection(SPAN_NOT_INTEGER, repr(item)[:80])
        start, end = pair
        if end < start:
            return Rejection(SPAN_REVERSED, f"[{start}, {end}]")
        if start < 1 or end > n_lines:
            return Rejection(SPAN_OUT_OF_RANGE, f"[{start}, {end}] outside 1..{n_lines}")
        pairs.append((start, end))
    if not pairs and positive:
        return Rejection(EMPTY_SPANS)
    return SpansReply(normalize_spans(pairs, n_lines))


def parse_synth_reply(reply: Any, min_lines: int = 1) -> SynthReply | Rejection:
    data = _json_object(reply)
    if isinstance(data, Rejection):
        return data
    output = data.get("tool_output")
    if not isinstance(output, str) or not output.strip():
        return Rejection(MISSING_OUTPUT, f"keys: {sorted(data)}")
    output = output.rstrip("\n")
    n = len(output.split("\n"))
    if n < min_lines:
        return Rejection(OUTPUT_TOO_SHORT, f"{n} < {min_lines} lines")
    command = data.get("command")
    return SynthReply(command if isinstance(command, str) else "", output)
