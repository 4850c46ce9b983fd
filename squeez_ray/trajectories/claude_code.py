"""Claude Code session transcripts: ``<session-uuid>.jsonl``, one record per line.

A tool output is a ``tool_result`` block of a ``type:"user"`` line; its ``content`` is a string or
a list of text blocks. The model sees only that; the harness sometimes appends a
``<system-reminder>`` block, which is kept as a suffix and never pruned. The record's
``toolUseResult`` is a structured copy for the UI: its Bash ``stdout`` is changed along when it
equals the output exactly; other fields (Read ``file.content`` without the ``→`` numbers, Edit
patches, ...) are left as they were, which is safe for replay and resume. ``uuid`` /
``parentUuid`` are never touched.
"""

from __future__ import annotations

import json
from pathlib import Path

from squeez_ray.trajectories.base import (
    JsonlDoc,
    Observation,
    TrajectoryParseError,
    link_neighbours,
    load_jsonl_doc,
    text_of,
)

NAME = "claude-code"
_REMINDER = "<system-reminder>"


def load(path: Path) -> JsonlDoc:
    doc = load_jsonl_doc(path)
    for number, obj in enumerate(doc.objs, start=1):
        if obj is not None and not (isinstance(obj, dict) and "type" in obj):
            raise TrajectoryParseError(f"{path}: line {number} is not a Claude Code record (no 'type')")
    return doc


def split_reminder(text: str) -> tuple[str, str]:
    """(tool output, appended system-reminder suffix with the blank lines before it)."""
    start = text.find(_REMINDER)
    if start < 0 or not text.rstrip().endswith("</system-reminder>"):
        return text, ""
    while start > 0 and text[start - 1] == "\n":
        start -= 1
    return text[:start], text[start:]


def _blocks(obj: dict) -> list:
    message = obj.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


def iter_observations(doc: JsonlDoc) -> list[Observation]:
    calls: dict[str, tuple[str | None, str | None, str | None]] = {}
    said: dict[str, list[str]] = {}  # message.id -> text/thinking seen so far for that reply
    task = None
    observations: list[Observation] = []
    for i, obj in enumerate(doc.objs):
        if not isinstance(obj, dict):
            continue
        if obj.get("type") == "assistant":
            message_id = (obj.get("message") or {}).get("id")
            for block in _blocks(obj):
                kind = block.get("type") if isinstance(block, dict) else None
                if kind in ("text", "thinking"):
                    said.setdefault(message_id, []).append(block.get("text") or block.get("thinking") or "")
                elif kind == "tool_use":
                    thought = "\n".join(said.get(message_id, [])) or None
                    calls[block.get("id")] = (block.get("name"), json.dumps(block.get("input"), ensure_ascii=False),
                                              thought)
            continue
        if obj.get("type") != "user":
            continue
        if task is None and not obj.get("isMeta"):
            content = (obj.get("message") or {}).get("content")
            if isinstance(content, str) or not any(isinstance(b, dict) and b.get("type") == "tool_result"
                                                   for b in content or []):
                task = text_of(content)
        for b, block in enumerate(_blocks(obj)):
            if not (isinstance(block, dict) and block.get("type") == "tool_result"):
                continue
            tool, args, thought = calls.get(block.get("tool_use_id"), (None, None, None))
            content = block.get("content")
            parts = [(None, content)] if isinstance(content, str) else [
                (k, sub.get("text")) for k, sub in enumerate(content or [])
                if isinstance(sub, dict) and sub.get("type") == "text" and isinstance(sub.get("text"), str)]
            for k, text in parts:
                where = f"line {i + 1} content[{b}]" + (f".content[{k}]" if k is not None else "")
                observations.append(Observation(index=len(observations), text=split_reminder(text)[0], where=where,
                                                locator=(i, b, k), tool=tool, args=args, thought=thought, task=task))
    return link_neighbours(observations)


def set_observation(doc: JsonlDoc, obs: Observation, new_text: str) -> None:
    i, b, k = obs.locator
    obj = doc.objs[i]
    block = _blocks(obj)[b]
    if k is None:
        old, suffix = split_reminder(block["content"])
        block["content"] = new_text + suffix
        result = obj.get("toolUseResult")
        if isinstance(result, dict) and result.get("stdout") == old:
            result["stdout"] = new_text
    else:
        sub = block["content"][k]
        sub["text"] = new_text + split_reminder(sub["text"])[1]
    doc.changed.add(i)


def dump(doc: JsonlDoc) -> bytes:
    return doc.dump()
