"""mini-swe-agent ``.traj.json``: v2 (``role:"tool"`` messages, ``trajectory_format``
mini-swe-agent-1.1) and v1 (text, observations are ``role:"user"`` messages).

The rendered observation is ``<returncode>N</returncode>\\n<output>\\n…</output>``; only the text
inside ``<output>`` is pruned, the tags stay. Long outputs were rendered as ``<output_head>`` and
``<output_tail>`` parts: each part is its own observation. In v2 ``extra.raw_output`` is a second
copy of the plain ``<output>`` text and is changed with it; for the head/tail form it holds the
whole output the model never saw, and is left as it was.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from squeez_ray.trajectories.base import (
    JsonDoc,
    Observation,
    TrajectoryParseError,
    link_neighbours,
    load_json_doc,
    text_of,
)

NAME = "mini-swe-agent"

# Each pattern captures (prefix, body, suffix); the body is what the tool printed.
_PLAIN = re.compile(r"(?s)(.*?<output>\n)(.*)(</output>\s*)\Z")
_PARTS = {
    "head": re.compile(r"(?s)(.*?<output_head>\n)(.*?)(\n</output_head>.*)\Z"),
    "tail": re.compile(r"(?s)(.*<output_tail>\n)(.*?)(\n</output_tail>\s*)\Z"),
}
_BASH_BLOCK = re.compile(r"(?s)```(?:bash|sh)?\n(.*?)```")


def load(path: Path) -> JsonDoc:
    doc = load_json_doc(path, ensure_ascii=True)
    data = doc.data
    if not (isinstance(data, dict) and "trajectory_format" in data and isinstance(data.get("messages"), list)):
        raise TrajectoryParseError(f"{path}: not a mini-swe-agent trajectory (needs 'trajectory_format' and "
                                   "'messages')")
    return doc


def _parts(content: str) -> list[tuple[str, str]]:
    """(part name, body) for each prunable region of a rendered observation."""
    if "<output_head>" in content:
        found = [(name, m.group(2)) for name, pattern in _PARTS.items() if (m := pattern.match(content))]
        return found
    m = _PLAIN.match(content)
    return [("output", m.group(2))] if m and "<returncode>" in m.group(1) else []


def iter_observations(doc: JsonDoc) -> list[Observation]:
    messages = doc.data["messages"]
    task = next((text_of(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"), None)
    calls: dict[str, tuple[str | None, str | None, str | None]] = {}  # tool_call_id -> (tool, args, thought)
    last_call: tuple[str | None, str | None, str | None] = (None, None, None)
    observations: list[Observation] = []
    seen_task = False
    for j, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        role, content = message.get("role"), message.get("content")
        if role == "assistant":
            thought = text_of(content)
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                calls[call.get("id")] = (function.get("name"), _command(function.get("arguments")), thought)
            if not message.get("tool_calls"):  # v1: THOUGHT text + one fenced bash block
                block = _BASH_BLOCK.search(thought or "")
                last_call = ("bash", block.group(1).strip() if block else None,
                             (thought or "").split("```")[0].strip() or None)
            continue
        if role == "user" and not seen_task:
            seen_task = True
            continue
        if role not in ("tool", "user") or not isinstance(content, str):
            continue
        tool, args, thought = calls.get(message.get("tool_call_id"), last_call) if role == "tool" else last_call
        for part, body in _parts(content):
            observations.append(Observation(index=len(observations), text=body, where=f"messages[{j}] <{part}>",
                                            locator=(j, part), tool=tool, args=args, thought=thought, task=task))
    return link_neighbours(observations)


def set_observation(doc: JsonDoc, obs: Observation, new_text: str) -> None:
    j, part = obs.locator
    message = doc.data["messages"][j]
    content = message["content"]
    pattern = _PLAIN if part == "output" else _PARTS[part]
    m = pattern.match(content)
    if m is None:
        raise ValueError(f"{doc.path}: messages[{j}] lost its <{part}> wrapper")
    message["content"] = m.group(1) + new_text + m.group(3)
    extra = message.get("extra")
    if part == "output" and isinstance(extra, dict) and extra.get("raw_output") == m.group(2):
        extra["raw_output"] = new_text
    doc.changed = True


def dump(doc: JsonDoc) -> bytes:
    return doc.dump()


def _command(arguments: object) -> str | None:
    """The ``command`` of a bash tool call's JSON arguments, else the arguments as given."""
    if not isinstance(arguments, str):
        return None
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        return arguments
    return parsed.get("command", arguments) if isinstance(parsed, dict) else arguments
