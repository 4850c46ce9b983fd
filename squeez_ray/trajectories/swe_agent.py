"""SWE-agent ``.traj`` (0.x and 1.x): one JSON object with ``trajectory`` and ``history``.

An observation lives in up to three places (TRAJECTORY_FORMATS.md section 1):
``trajectory[i].observation`` (raw), the paired history message (raw + template suffix), and the
copy of that history message inside every later step's ``query``/``messages``. All are changed
together, or none: when a copy does not start with the raw text (a truncated or "no output"
template), the observation is left alone rather than made inconsistent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from squeez_ray.trajectories.base import (
    JsonDoc,
    Observation,
    TrajectoryParseError,
    link_neighbours,
    load_json_doc,
    replace_prefix,
    text_of,
)

NAME = "swe-agent"


def load(path: Path) -> JsonDoc:
    doc = load_json_doc(path, ensure_ascii=True)
    data = doc.data
    if not (isinstance(data, dict) and isinstance(data.get("trajectory"), list)
            and isinstance(data.get("history"), list)):
        raise TrajectoryParseError(f"{path}: not a SWE-agent trajectory (needs 'trajectory' and 'history' lists)")
    return doc


def _is_demo(message: dict) -> bool:
    return bool(message.get("is_demo")) or message.get("message_type") == "demonstration"


def _observation_messages(history: list[dict]) -> tuple[list[int], str | None]:
    """History indices of observation messages in step order, and the task text.

    Skip system and demonstration messages and the first real user message (the instance
    template); what remains in user/tool role pairs with the steps by position.
    """
    indices: list[int] = []
    task = None
    for j, message in enumerate(history):
        if not isinstance(message, dict) or message.get("role") not in ("user", "tool") or _is_demo(message):
            continue
        if task is None:
            task = text_of(message.get("content")) or ""
            continue
        indices.append(j)
    return indices, task


def iter_observations(doc: JsonDoc) -> list[Observation]:
    data = doc.data
    history = data["history"]
    paired, task = _observation_messages(history)
    observations = []
    for i, step in enumerate(data["trajectory"]):
        raw = step.get("observation") if isinstance(step, dict) else None
        if not isinstance(raw, str):
            continue
        history_index = paired[i] if i < len(paired) else None
        obs = Observation(index=len(observations), text=raw, where=f"trajectory[{i}].observation",
                          locator=(i, history_index), tool=None, args=_str(step.get("action")),
                          thought=_str(step.get("thought")), task=task)
        if not raw:
            obs.skip_reason = "empty output"
        elif history_index is not None and replace_prefix(history[history_index].get("content"), raw, raw) is None:
            # A truncated or no-output template holds no verbatim copy: pruning would make copies diverge.
            obs.skip_reason = "history copy is not verbatim (template)"
        observations.append(obs)
    return link_neighbours(observations)


def set_observation(doc: JsonDoc, obs: Observation, new_text: str) -> None:
    step_index, history_index = obs.locator
    data = doc.data
    old = data["trajectory"][step_index]["observation"]
    if history_index is not None:  # check before changing anything, so a failure leaves the copies equal
        message = data["history"][history_index]
        old_content = message.get("content")
        new_content = replace_prefix(old_content, old, new_text)
        if new_content is None:
            raise ValueError(f"{doc.path}: history[{history_index}] no longer starts with the observation")
    data["trajectory"][step_index]["observation"] = new_text
    if history_index is not None:
        message["content"] = new_content
        # Each step's query/messages repeats the history so far: same position, same role, same text
        # (a cache-control processor may have turned the string into a text block; a processor that
        # elided old outputs left no copy of the text, so that message stays).
        old_text = text_of(old_content)
        for step in data["trajectory"]:
            for key in ("query", "messages"):
                copies = step.get(key) if isinstance(step, dict) else None
                if not (isinstance(copies, list) and history_index < len(copies)
                        and isinstance(copies[history_index], dict)):
                    continue
                copy = copies[history_index]
                if copy.get("role") == message.get("role") and text_of(copy.get("content")) == old_text:
                    replaced = replace_prefix(copy.get("content"), old, new_text)
                    if replaced is not None:
                        copies[history_index] = {**copy, "content": replaced}
    doc.changed = True


def dump(doc: JsonDoc) -> bytes:
    return doc.dump()


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None
