"""What every trajectory adapter shares: the observation handle, and documents that re-serialize
byte-identically (see ../shared/docs/TRAJECTORY_FORMATS.md, "Verified write-back rule").

An adapter is a module with ``NAME``, ``load(path) -> doc``, ``iter_observations(doc) ->
[Observation]``, ``set_observation(doc, obs, new_text)`` and ``dump(doc)``. ``set_observation``
replaces the raw text of one observation in every copy the format keeps; ``dump`` gives the
original bytes back when nothing was set, and otherwise re-serializes only what changed.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class TrajectoryParseError(ValueError):
    """A file that cannot be read as the format it was detected (or forced) as; names file and place."""


# Python's JSON parser recurses per nesting level: deep input raises RecursionError, not JSONDecodeError.
TOO_DEEP = "JSON nested too deeply to read (arrays or objects inside each other over ~1000 levels)"


@dataclass
class Observation:
    """One tool output inside a stored run, with what the pipeline needs to build a query.

    ``text`` is the raw tool output only (wrappers such as mini-swe-agent's ``<output>`` tags or the
    SWE-agent template suffix are already cut off); ``locator`` is private to the adapter.
    """

    index: int  # order within the file
    text: str
    where: str  # human-readable place, e.g. "trajectory[3]" or "line 57"
    locator: Any
    tool: str | None = None
    args: str | None = None  # the call that produced the output, as text
    thought: str | None = None  # the agent's reasoning before the call
    task: str | None = None
    next_thought: str | None = None  # filled by link_neighbours: the agent's reasoning after seeing it
    next_action: str | None = None
    skip_reason: str | None = None  # set when the adapter cannot write this one back safely


def link_neighbours(observations: list[Observation]) -> list[Observation]:
    """Give each observation the thought/call of the next one: what the agent did after reading it."""
    for current, following in itertools.pairwise(observations):
        current.next_thought = following.thought
        current.next_action = _call_text(following)
    return observations


def _call_text(obs: Observation) -> str | None:
    parts = [p for p in (obs.tool, obs.args) if p]
    return " ".join(parts) if parts else None


def read_text(path: Path) -> str:
    """Strict UTF-8: a file in another encoding is a parse error, never silently re-encoded."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TrajectoryParseError(f"{path}: not UTF-8 (byte {error.start}: {error.reason})") from None


def compact(obj: Any) -> str:
    """The compact form JS ``JSON.stringify`` and pydantic ``model_dump_json`` write."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------- whole-file JSON documents


@dataclass
class JsonDoc:
    """A JSON file written by ``json.dumps(obj, indent=N)`` (or compact), kept with its bytes."""

    path: Path
    data: Any
    original: bytes
    indent: int | None
    ensure_ascii: bool
    trailing: str  # what followed the JSON value in the file ("" or "\n")
    changed: bool = False

    def serialize(self) -> bytes:
        if self.indent is None:
            text = json.dumps(self.data, separators=(",", ":"), ensure_ascii=self.ensure_ascii)
        else:
            text = json.dumps(self.data, indent=self.indent, ensure_ascii=self.ensure_ascii)
        return (text + self.trailing).encode("utf-8")

    def dump(self) -> bytes:
        return self.serialize() if self.changed else self.original


def load_json_doc(path: Path, *, ensure_ascii: bool) -> JsonDoc:
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise TrajectoryParseError(f"{path}: invalid JSON at line {error.lineno} column {error.colno}: "
                                   f"{error.msg}") from None
    except RecursionError:
        raise TrajectoryParseError(f"{path}: {TOO_DEEP}") from None
    body = text.rstrip("\r\n")
    indent = _detect_indent(body)
    doc = JsonDoc(path, data, text.encode("utf-8"), indent, ensure_ascii, text[len(body):])
    if doc.serialize() != doc.original:
        # The writer is not the one this format documents: rewriting would change bytes that are
        # not observations, so the caller passes the file through (it still round-trips).
        raise TrajectoryParseError(f"{path}: the documented serializer (indent={indent}, "
                                   f"ensure_ascii={ensure_ascii}) does not reproduce this file's bytes")
    return doc


def _detect_indent(body: str) -> int | None:
    if "\n" not in body[:2]:  # "{\n  ..." is indented; "{"key": ..." on one line is compact
        return None
    second = body.split("\n", 2)[1]
    return len(second) - len(second.lstrip(" "))


# ---------------------------------------------------------------- JSON Lines documents


@dataclass
class JsonlDoc:
    """One JSON value per line; only changed lines are re-serialized, each keeping its terminator."""

    path: Path
    raw_lines: list[str]  # each with its own terminator ("\n", "\r\n" or "" on the last line)
    objs: list[Any]  # None for blank lines
    changed: set[int] = field(default_factory=set)

    def dump(self) -> bytes:
        if not self.changed:
            return "".join(self.raw_lines).encode("utf-8")
        out = []
        for i, raw in enumerate(self.raw_lines):
            if i in self.changed:
                terminator = raw[len(raw.rstrip("\r\n")):]
                out.append(compact(self.objs[i]) + terminator)
            else:
                out.append(raw)
        return "".join(out).encode("utf-8")


def load_jsonl_doc(path: Path) -> JsonlDoc:
    text = read_text(path)
    raw_lines = [line + "\n" for line in text.split("\n")]
    raw_lines[-1] = raw_lines[-1][:-1]
    if raw_lines[-1] == "":
        raw_lines.pop()
    objs: list[Any] = []
    for number, raw in enumerate(raw_lines, start=1):
        stripped = raw.rstrip("\r\n")
        if not stripped.strip():
            objs.append(None)
            continue
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError as error:
            raise TrajectoryParseError(f"{path}: line {number} is not JSON (column {error.colno}: "
                                       f"{error.msg})") from None
        except RecursionError:
            raise TrajectoryParseError(f"{path}: line {number}: {TOO_DEEP}") from None
        if compact(obj) != stripped:
            raise TrajectoryParseError(f"{path}: line {number} is not in the compact JSON form this format "
                                       "is written in, so it could not be rewritten byte-exactly")
        objs.append(obj)
    return JsonlDoc(path, raw_lines, objs)


# ---------------------------------------------------------------- small text helpers


def text_of(content: Any) -> str | None:
    """A message content as text: a string, or the joined ``text`` of its text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") in ("text", "input_text",
                                                                                                  "output_text")]
        return "\n".join(texts) if texts else None
    return None


def replace_prefix(content: Any, old: str, new: str) -> Any | None:
    """``content`` (a string or a list of text blocks) with a leading ``old`` replaced by ``new``.

    Used for rendered copies such as SWE-agent's history message, which is the raw observation
    followed by a template suffix. Returns None when ``old`` does not start the content.
    """
    if isinstance(content, str):
        return new + content[len(old):] if content.startswith(old) else None
    if isinstance(content, list):
        for i, block in enumerate(content):
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                if block["text"].startswith(old):
                    blocks = list(content)
                    blocks[i] = {**block, "text": new + block["text"][len(old):]}
                    return blocks
                return None  # only the first text block can start with the observation
    return None
