"""Row converters between the canonical labelled row and the other shapes we import and export.

- ``cases``: the hand-labelled cases of ``../shared/eval`` (``id, tool, query, output, gold``, with
  optional ``source`` (how the output was produced: kept as our ``command``) and ``notes``).
- ``squeez``: the released Squeez SFT rows: ``prompt`` (ChatML text or chat messages holding
  ``<query>``, optional ``<background_task>``, ``<tool_output>``), ``response`` (the
  ``<relevant_lines>`` target or the legacy JSON ``{"relevant_lines": [...]}``) and ``metadata``.
  Spans are recovered by finding the target lines in the tool output, in order.
- ``encoder``: the released encoder rows (``task``, ``tool_output``, ``relevant_lines``), see
  ``encoder_rows``: positions recovered by matching the lines in order, ambiguous ones counted.
- ``canonical``: the contract itself (``gold_spans`` present).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from squeez_ray.prompt import DEFAULT_SYSTEM_PROMPT, cut_query, parse_target, render_prompt, render_target
from squeez_ray.schema.contracts import DataError, RowChecker, check_example, locate_lines
from squeez_ray.spans import kept_text, split_lines

FORMATS = ("canonical", "cases", "squeez", "encoder")


def detect_format(columns: set[str], path: str | Path | None) -> str:
    """Which shape rows with these columns have; a DataError naming what is missing otherwise."""
    if "gold_spans" in columns:
        return "canonical"
    if {"prompt", "response"} <= columns:
        return "squeez"
    if {"output", "gold"} <= columns:
        return "cases"
    if {"task", "tool_output", "relevant_lines"} <= columns:
        return "encoder"
    raise DataError(
        f"cannot tell the row format from its columns ({', '.join(sorted(columns)) or 'none'}): expected "
        "'gold_spans' (canonical rows), 'prompt' + 'response' (Squeez rows), 'output' + 'gold' (cases) or "
        "'task' + 'tool_output' + 'relevant_lines' (Squeez encoder rows)",
        path=path, row=1)


def from_row(raw: Any, fmt: str, *, path: str | Path | None, row: int, source: str | None = None) -> dict[str, Any]:
    """Any supported row shape -> one checked canonical row."""
    if not isinstance(raw, Mapping):
        raise DataError(f"expected an object with fields, got {type(raw).__name__}", path=path, row=row)
    if fmt == "canonical":
        return check_example(raw, path=path, row=row)
    if fmt == "cases":
        return from_cases_row(raw, path=path, row=row, source=source or "cases")
    if fmt == "squeez":
        return from_squeez_row(raw, path=path, row=row)
    if fmt == "encoder":
        from squeez_ray.schema.encoder_rows import from_encoder_row

        return from_encoder_row(raw, path=path, row=row)[0]
    raise ValueError(f"unknown row format {fmt!r}; choose one of {', '.join(FORMATS)}")


# ----- cases ---------------------------------------------------------------------------------------

def from_cases_row(raw: Mapping[str, Any], *, path: str | Path | None, row: int, source: str) -> dict[str, Any]:
    c = RowChecker({"instance_id": raw.get("id"), **raw}, path, row)
    for required in ("id", "tool", "query", "output", "gold"):
        if raw.get(required) is None:
            raise c.error(required, "is missing (required in the cases format)")
    try:
        return check_example({
            "instance_id": raw["id"], "source": source, "tool_type": raw["tool"], "query": raw["query"],
            "tool_output": raw["output"], "gold_spans": raw["gold"], "command": raw.get("source"),
            "notes": raw.get("notes"),
        }, path=path, row=row)
    except DataError as error:  # name the field as the user's file spells it
        field = _CASES_NAMES.get(error.field or "", error.field)
        raise DataError(error.detail, path=path, row=row, field=field, instance_id=c.instance_id) from None


# canonical field -> its name in the cases format
_CASES_NAMES = {"instance_id": "id", "tool_type": "tool", "tool_output": "output", "gold_spans": "gold",
                "command": "source"}


def to_cases_row(example: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": example["instance_id"], "tool": example["tool_type"], "query": example["query"],
        "output": example["tool_output"],
        "gold": [[s["start_line"], s["end_line"]] for s in example["gold_spans"]],
    }
    if example.get("command") is not None:
        out["source"] = example["command"]
    if example.get("notes") is not None:
        out["notes"] = example["notes"]
    return out


# ----- Squeez prompt / response ---------------------------------------------------------------------

# Canonical fields the prompt and response cannot hold travel in ``metadata``.
_METADATA_FIELDS = ("instance_id", "source", "tool_type", "is_irrelevant", "command", "repo", "split",
                    "split_group_id", "notes", "background_task")


def from_squeez_row(raw: Mapping[str, Any], *, path: str | Path | None, row: int) -> dict[str, Any]:
    metadata = raw.get("metadata")
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except json.JSONDecodeError as error:
            raise DataError(f"is text but not JSON: {error.msg}", path=path, row=row, field="metadata") from None
    if metadata is not None and not isinstance(metadata, Mapping):
        raise DataError(f"expected an object, got {type(metadata).__name__}", path=path, row=row, field="metadata")
    # Row-level fields win over metadata: some exports put instance_id / tool_type at the top level.
    fields = {**(metadata or {}), **{k: v for k, v in raw.items() if k in _METADATA_FIELDS and v is not None}}
    c = RowChecker(fields, path, row)
    user = _user_text(raw.get("prompt"), c)
    tool_output = _tag(user, "tool_output", last_close=True)
    if tool_output is None:
        raise c.error("prompt", "holds no <tool_output>...</tool_output> block")
    head = user[:user.find("<tool_output>")]  # the output may print tag names itself: look before it
    query = _tag(head, "query")
    if query is None:  # older Squeez rows conditioned on the task description instead of a focused query
        query = _tag(head, "task")
    if query is None:
        raise c.error("prompt", "holds neither a <query> nor a <task> block")
    full_query = fields.get("query")  # our exports keep a query longer than the prompt's cut in metadata
    if isinstance(full_query, str) and cut_query(full_query) == query:
        query = full_query
    response = raw.get("response")
    if not isinstance(response, str):
        raise c.error("response", f"expected text, got {type(response).__name__}")
    target = parse_target(response)
    if target.format == "bare":
        raise c.error("response", "holds neither <relevant_lines> tags nor a JSON {\"relevant_lines\": [...]} target")
    if not target.complete:
        raise c.error("response", "the closing </relevant_lines> tag is missing (truncated target?)")
    lines = split_lines(tool_output)
    spans = _spans_from_metadata(metadata, lines, target.lines, c)
    if spans is None:
        spans = [[n, n] for n in locate_lines(target.lines, lines, c)]
    return check_example({
        **fields, "query": query, "background_task": _tag(head, "background_task") or fields.get("background_task"),
        "tool_output": tool_output,
        "gold_spans": spans, "tool_type": fields.get("tool_type") or "unknown",
        "instance_id": fields.get("instance_id") or f"row-{row}",
    }, path=path, row=row, defaults={"source": "squeez"})


def _spans_from_metadata(metadata: Mapping[str, Any] | None, lines: list[str], target: list[str],
                         c: RowChecker) -> list[Any] | None:
    """Our own exports keep the exact spans in metadata (text alone cannot say which of two equal lines
    was meant); they must cut exactly the response's lines, or the row contradicts itself."""
    spans = (metadata or {}).get("gold_spans")
    if spans is None:
        return None
    field = "metadata.gold_spans"
    checked = RowChecker({field: spans, "instance_id": c.instance_id}, c.path, c.row).spans(field, "\n".join(lines))
    pairs = [(s["start_line"], s["end_line"]) for s in checked]
    if (kept_text(lines, pairs).split("\n") if pairs else []) != list(target):
        raise c.error(field, "do not cut the lines the response holds")
    return spans


def _user_text(prompt: Any, c: RowChecker) -> str:
    if isinstance(prompt, list):  # chat messages: the last user turn holds the tags
        users = [m.get("content") for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
        if not users or not isinstance(users[-1], str):
            raise c.error("prompt", "is a message list without a user message holding text")
        return c.utf8("prompt", users[-1])
    if not isinstance(prompt, str):
        raise c.error("prompt", f"expected ChatML text or a list of chat messages, got {type(prompt).__name__}")
    c.utf8("prompt", prompt)
    start = prompt.rfind("<|im_start|>user")
    return prompt[start:] if start >= 0 else prompt  # the system turn may quote tag names; skip it


def _tag(text: str, name: str, *, last_close: bool = False) -> str | None:
    """The body of ``<name>...</name>``, minus the one newline the released layout puts inside each tag.

    ``last_close`` takes the last closing tag: a tool output may itself print the tag name.
    """
    open_tag, close_tag = f"<{name}>", f"</{name}>"
    start = text.find(open_tag)
    if start < 0:
        return None
    start += len(open_tag)
    end = text.rfind(close_tag) if last_close else text.find(close_tag, start)
    if end < start:
        return None
    body = text[start:end]
    body = body[1:] if body.startswith("\n") else body
    return body[:-1] if body.endswith("\n") else body


def to_squeez_row(example: Mapping[str, Any], system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> dict[str, Any]:
    """The released SFT layout: the prompt training and serving render (``render_prompt``: the query
    cut to 1,000 characters as there), the XML target, and metadata holding what the text cannot
    (spans, the background task, the full query when it was cut)."""
    prompt = render_prompt(example["query"], example["tool_output"], system_prompt)
    lines = split_lines(example["tool_output"])
    spans = [(s["start_line"], s["end_line"]) for s in example["gold_spans"]]
    kept = kept_text(lines, spans).split("\n") if spans else []
    metadata = {k: example.get(k) for k in _METADATA_FIELDS}
    if cut_query(example["query"]) != example["query"]:
        metadata["query"] = example["query"]
    metadata["gold_spans"] = [dict(s) for s in example["gold_spans"]]
    metadata["num_total_lines"] = len(lines)
    metadata["num_relevant_lines"] = len(kept)
    return {"prompt": prompt, "response": render_target(kept), "metadata": metadata}
