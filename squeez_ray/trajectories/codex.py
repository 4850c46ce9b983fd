"""Codex CLI rollouts (``rollout-<ts>-<uuid>.jsonl``), legacy flat layout and current envelope.

Legacy: a session-meta first line (``instructions``), ``record_type:"state"`` lines, and bare
Responses-API items. Current: ``{"timestamp","type","payload"}`` lines whose ``response_item``
payloads are those items. A tool output is ``function_call_output.output`` (or
``custom_tool_call_output``), a string that is often JSON inside a string: shell output is
``{"output": <text>, "metadata": …}``, MCP output a list of ``{"text", "type"}`` blocks. The text
is pruned inside that envelope, which is re-encoded compactly (checked to reproduce the original
first). The TUI's ``exec_command_end`` duplicates are a UI log the model never reads; they stay.
"""

from __future__ import annotations

import json
from pathlib import Path

from squeez_ray.trajectories.base import (
    JsonlDoc,
    Observation,
    TrajectoryParseError,
    compact,
    link_neighbours,
    load_jsonl_doc,
    text_of,
)

NAME = "codex"
_OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")
_CALL_TYPES = ("function_call", "custom_tool_call")


def load(path: Path) -> JsonlDoc:
    doc = load_jsonl_doc(path)
    for number, obj in enumerate(doc.objs, start=1):
        if obj is not None and not isinstance(obj, dict):
            raise TrajectoryParseError(f"{path}: line {number} is not a JSON object")
    return doc


def _item(obj: dict) -> dict | None:
    if obj.get("type") == "response_item":
        payload = obj.get("payload")
        return payload if isinstance(payload, dict) else None
    return obj if "payload" not in obj else None


def _decode(output: str) -> tuple[str, object]:
    """('shell', dict) / ('blocks', list) when ``output`` is a JSON envelope that re-encodes exactly, else ('plain', None)."""
    if output[:1] not in ("{", "["):
        return "plain", None
    try:
        value = json.loads(output)
    except json.JSONDecodeError:
        return "plain", None
    if compact(value) != output:
        return "plain", None  # would not re-encode byte-exactly: treat the whole string as text
    if isinstance(value, dict) and isinstance(value.get("output"), str):
        return "shell", value
    if isinstance(value, list) and value and all(isinstance(b, dict) and isinstance(b.get("text"), str) for b in value):
        return "blocks", value
    return "plain", None


def _is_user_task(item: dict) -> bool:
    if item.get("type") != "message" or item.get("role") != "user":
        return False
    text = text_of(item.get("content")) or ""
    return not text.lstrip().startswith(("<environment_context>", "<user_instructions>"))


def iter_observations(doc: JsonlDoc) -> list[Observation]:
    calls: dict[str, tuple[str | None, str | None, str | None]] = {}
    last_thought = None
    task = None
    observations: list[Observation] = []
    for i, obj in enumerate(doc.objs):
        item = _item(obj) if isinstance(obj, dict) else None
        if item is None:
            continue
        kind = item.get("type")
        if kind == "reasoning":
            last_thought = "\n".join(s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict)) \
                or last_thought
        elif kind == "message" and item.get("role") == "assistant":
            last_thought = text_of(item.get("content")) or last_thought
        elif task is None and _is_user_task(item):
            task = text_of(item.get("content"))
        elif kind in _CALL_TYPES:
            calls[item.get("call_id")] = (item.get("name"), _call_args(item), last_thought)
        elif kind in _OUTPUT_TYPES and isinstance(item.get("output"), str):
            tool, args, thought = calls.get(item.get("call_id"), (None, None, None))
            shape, value = _decode(item["output"])
            if shape == "shell":
                parts = [("output", value["output"])]  # type: ignore[index]
            elif shape == "blocks":
                parts = [(k, block["text"]) for k, block in enumerate(value)]  # type: ignore[arg-type]
            else:
                parts = [(None, item["output"])]
            for part, text in parts:
                observations.append(Observation(index=len(observations), text=text,
                                                where=f"line {i + 1}" + (f" [{part}]" if part is not None else ""),
                                                locator=(i, shape, part), tool=tool, args=args, thought=thought,
                                                task=task))
    return link_neighbours(observations)


def _call_args(item: dict) -> str | None:
    raw = item.get("arguments", item.get("input"))
    if not isinstance(raw, str):
        return None
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    command = parsed.get("command") if isinstance(parsed, dict) else None
    if isinstance(command, list):  # shell argv such as ["bash", "-lc", "ls -la"]
        return command[-1] if len(command) >= 3 and command[1] in ("-lc", "-c") else " ".join(map(str, command))
    return raw


def set_observation(doc: JsonlDoc, obs: Observation, new_text: str) -> None:
    i, shape, part = obs.locator
    item = _item(doc.objs[i])
    if shape == "plain":
        item["output"] = new_text
    else:
        value = json.loads(item["output"])
        if shape == "shell":
            value["output"] = new_text
        else:
            value[part]["text"] = new_text
        item["output"] = compact(value)
    doc.changed.add(i)


def dump(doc: JsonlDoc) -> bytes:
    return doc.dump()
