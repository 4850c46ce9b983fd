"""OpenHands V1 (software-agent-sdk) conversation directory: ``base_state.json`` plus
``events/event-NNNNN-<uuid>.json``, one compact JSON event per file.

The unit is the directory. A tool output is ``ObservationEvent.observation.content``, a list of
blocks; the ``text`` of each text block is pruned, image blocks and all other keys stay. Only the
changed event files are rewritten; every other file in the directory is copied as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from squeez_ray.trajectories.base import (
    JsonDoc,
    Observation,
    TrajectoryParseError,
    link_neighbours,
    load_json_doc,
    text_of,
)

NAME = "openhands-v1"


@dataclass
class ConversationDoc:
    path: Path  # the conversation directory
    events: dict[str, JsonDoc]  # relative path ("events/event-….json") -> document


def is_conversation_dir(path: Path) -> bool:
    return path.is_dir() and (path / "base_state.json").is_file() and (path / "events").is_dir()


def load(path: Path) -> ConversationDoc:
    if not is_conversation_dir(path):
        raise TrajectoryParseError(f"{path}: not an OpenHands V1 conversation (needs base_state.json and events/)")
    events = {}
    for file in sorted((path / "events").glob("*.json")):
        doc = load_json_doc(file, ensure_ascii=False)
        if not (isinstance(doc.data, dict) and isinstance(doc.data.get("kind"), str)):
            raise TrajectoryParseError(f"{file}: not an OpenHands V1 event (no 'kind')")
        events[file.relative_to(path).as_posix()] = doc
    return ConversationDoc(path, events)


def event_observations(events: list[tuple[str, dict]], task: str | None = None) -> list[Observation]:
    """Observations of V1 events given as (name, event); the locator is (name, content block index).

    Shared with V1 benchmark ``output.jsonl`` rows, which embed the same event dicts in ``history``.
    """
    actions: dict = {}
    observations: list[Observation] = []
    for name, event in events:
        kind = event.get("kind")
        if kind == "MessageEvent" and event.get("source") == "user" and task is None:
            task = text_of((event.get("llm_message") or {}).get("content"))
        elif kind == "ActionEvent":
            actions[event.get("id")] = event
        elif kind == "ObservationEvent" and isinstance(event.get("observation"), dict):
            action = actions.get(event.get("action_id"), {})
            call = (action.get("tool_call") or {}).get("arguments")
            thought = text_of(action.get("thought")) or None
            for b, block in enumerate(event["observation"].get("content") or []):
                if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                    observations.append(Observation(
                        index=len(observations), text=block["text"], where=f"{name} observation.content[{b}]",
                        locator=(name, b), tool=event.get("tool_name"), args=call, thought=thought, task=task))
    return link_neighbours(observations)


def iter_observations(doc: ConversationDoc) -> list[Observation]:
    return event_observations([(name, event_doc.data) for name, event_doc in doc.events.items()])


def set_observation(doc: ConversationDoc, obs: Observation, new_text: str) -> None:
    name, b = obs.locator
    event_doc = doc.events[name]
    event_doc.data["observation"]["content"][b]["text"] = new_text
    event_doc.changed = True


def dump(doc: ConversationDoc) -> dict[str, bytes]:
    """Relative path -> bytes for every event file (unchanged ones are their original bytes)."""
    return {name: event_doc.dump() for name, event_doc in doc.events.items()}
