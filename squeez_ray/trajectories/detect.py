"""Which format a stored run is in, decided from its content (never its name), and which paths of
an input tree are units: one file, or one OpenHands V1 conversation directory."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

from squeez_ray.trajectories import (
    claude_code,
    codex,
    mini_swe_agent,
    openhands,
    openhands_v1,
    swe_agent,
)

ADAPTERS: dict[str, ModuleType] = {m.NAME: m for m in (swe_agent, mini_swe_agent, openhands, openhands_v1,
                                                       claude_code, codex)}
# Names whose content, when unreadable, is reported as a failed trajectory rather than "another file".
_TRAJECTORY_SUFFIXES = (".traj", ".json", ".jsonl")
_CODEX_TYPES = {"session_meta", "response_item", "turn_context", "event_msg", "compacted"}


def discover_units(root: Path) -> list[str]:
    """Relative paths (POSIX) of every regular file and V1 conversation directory under ``root``, sorted.

    Symbolic links are never followed (``tree.scan_tree`` says what else the tree holds)."""
    from squeez_ray.trajectories.tree import scan_tree

    return scan_tree(root).units


def looks_like_trajectory(path: Path) -> bool:
    return path.is_dir() or path.name.endswith(_TRAJECTORY_SUFFIXES)


def detect_format(path: Path) -> str | None:
    """The adapter name for ``path``, or None for a file that is not a stored run (or not readable)."""
    if path.is_dir():
        return openhands_v1.NAME if openhands_v1.is_conversation_dir(path) else None
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        whole = json.loads(text)
    except (json.JSONDecodeError, RecursionError):  # RecursionError: nested too deeply; not a run we read
        whole = None
    if isinstance(whole, list):
        if whole and all(isinstance(e, dict) and ("action" in e or "observation" in e) for e in whole):
            return openhands.NAME
        return None
    if isinstance(whole, dict):
        if isinstance(whole.get("trajectory"), list) and isinstance(whole.get("history"), list):
            return swe_agent.NAME
        if "trajectory_format" in whole and isinstance(whole.get("messages"), list):
            return mini_swe_agent.NAME
        return _detect_lines([whole])
    # JSON Lines: look at the first few records.
    records = []
    for line in text.split("\n")[:20]:
        if line.strip():
            try:
                records.append(json.loads(line))
            except (json.JSONDecodeError, RecursionError):
                break
    return _detect_lines(records)


def _detect_lines(records: list) -> str | None:
    records = [r for r in records if isinstance(r, dict)]
    if not records:
        return None
    if isinstance(records[0].get("history"), list):
        return openhands.NAME
    if any("sessionId" in r or "parentUuid" in r for r in records):
        return claude_code.NAME
    if any(r.get("type") in _CODEX_TYPES and "payload" in r for r in records):
        return codex.NAME
    if "instructions" in records[0] and any(r.get("record_type") == "state" or r.get("type") in (
            "message", "reasoning", "function_call", "function_call_output") for r in records[1:]):
        return codex.NAME
    return None
