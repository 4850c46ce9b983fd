"""OpenHands v0.x event streams: an evaluation ``output.jsonl`` (one instance per line, events in
``history``) or a bare JSON list of events (UI download / ``save_trajectory_path``). V1 benchmark
``output.jsonl`` rows hold V1 events (``kind: ObservationEvent``) in ``history``; those are read
as in ``openhands_v1``.

``observation_event.content`` is the only full copy of a tool output; ``message`` (a summary) and
``extras`` (for edits: file contents, not output) are left alone. A ``read`` output starts with
the line ``Here's the result of running `cat -n` on <path>:``, which is kept as a header.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from squeez_ray.trajectories.base import (
    JsonDoc,
    JsonlDoc,
    Observation,
    TrajectoryParseError,
    link_neighbours,
    load_json_doc,
    load_jsonl_doc,
)
from squeez_ray.trajectories.openhands_v1 import event_observations

NAME = "openhands"

# Observation types that carry tool output; recall / agent_state_changed / null / think do not.
_TOOL_OUTPUTS = {"run", "read", "edit", "run_ipython", "browse", "error"}
_NOT_OUTPUTS = {"recall", "agent_state_changed", "null", "think"}
_CAT_N_HEADER = "Here's the result of running `cat -n` on "


def load(path: Path) -> JsonDoc | JsonlDoc:
    head = path.read_bytes()[:1].strip()
    if head == b"[":
        doc: JsonDoc | JsonlDoc = load_json_doc(path, ensure_ascii=True)
        if not isinstance(doc.data, list):
            raise TrajectoryParseError(f"{path}: not an OpenHands event list")
        return doc
    doc = load_jsonl_doc(path)
    for number, row in enumerate(doc.objs, start=1):
        if row is not None and not (isinstance(row, dict) and isinstance(row.get("history"), list)):
            raise TrajectoryParseError(f"{path}: line {number} is not an OpenHands output row (no 'history' list)")
    return doc


def _event_lists(doc: JsonDoc | JsonlDoc) -> list[tuple[Any, list, str | None]]:
    """(row key, events, task) per instance: the line number for output.jsonl, None for a bare list."""
    if isinstance(doc, JsonDoc):
        return [(None, doc.data, None)]
    return [(i, row["history"], row.get("instruction") if isinstance(row.get("instruction"), str) else None)
            for i, row in enumerate(doc.objs) if row is not None]


def iter_observations(doc: JsonDoc | JsonlDoc) -> list[Observation]:
    observations: list[Observation] = []
    for row_key, events, instruction in _event_lists(doc):
        if any(isinstance(e, dict) and isinstance(e.get("kind"), str) for e in events):  # V1 events
            v1 = event_observations([(k, e) for k, e in enumerate(events) if isinstance(e, dict)], instruction)
            for obs in v1:
                k, b = obs.locator
                obs.locator = (row_key, k, b)
                obs.where = f"{'' if row_key is None else f'line {row_key + 1} '}history[{k}].observation.content[{b}]"
            observations.extend(v1)
            continue
        actions = {e.get("id"): e for e in events if isinstance(e, dict) and "action" in e}
        task = instruction or next((e.get("args", {}).get("content") for e in events if isinstance(e, dict)
                                    and e.get("action") == "message" and e.get("source") == "user"), None)
        row_observations = []
        for k, event in enumerate(events):
            if not isinstance(event, dict) or "observation" not in event or not isinstance(event.get("content"), str):
                continue
            kind = event["observation"]
            if kind in _NOT_OUTPUTS or (kind not in _TOOL_OUTPUTS and "tool_call_metadata" not in event):
                continue
            action = actions.get(event.get("cause"), {})
            args = action.get("args") if isinstance(action.get("args"), dict) else {}
            metadata = action.get("tool_call_metadata") or {}
            call = args.get("command") or args.get("path") or args.get("code") or args.get("url")
            if call and args.get("view_range"):
                call = f"{call} {args['view_range']}"
            where = f"history[{k}]" if row_key is None else f"line {row_key + 1} history[{k}]"
            row_observations.append(Observation(
                index=0, text=_split_header(event["content"])[1], where=where, locator=(row_key, k),
                tool=metadata.get("function_name") or action.get("action") or kind,
                args=str(call) if call else None, thought=args.get("thought") or None, task=task))
        observations.extend(link_neighbours(row_observations))  # a row is one run: no linking across rows
    for i, obs in enumerate(observations):
        obs.index = i
    return observations


def _split_header(content: str) -> tuple[str, str]:
    first, sep, rest = content.partition("\n")
    if sep and _CAT_N_HEADER in first:
        return first + sep, rest
    return "", content


def set_observation(doc: JsonDoc | JsonlDoc, obs: Observation, new_text: str) -> None:
    row_key, k = obs.locator[:2]
    if isinstance(doc, JsonDoc):
        event = doc.data[k]
        doc.changed = True
    else:
        event = doc.objs[row_key]["history"][k]
        doc.changed.add(row_key)
    if len(obs.locator) == 3:  # a V1 event: the text of one content block
        event["observation"]["content"][obs.locator[2]]["text"] = new_text
        return
    header, _ = _split_header(event["content"])
    event["content"] = header + new_text


def dump(doc: JsonDoc | JsonlDoc) -> bytes:
    return doc.dump()
