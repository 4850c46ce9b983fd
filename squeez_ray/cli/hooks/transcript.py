"""The user's last real prompt, from a Claude Code or Codex session transcript (JSONL), in bounded memory.

The hook's query is the call's description plus the task the user gave. What is NOT the user's task,
though it sits in the transcript as a "user" entry (issue 37 item 3):

- tool results (Claude Code's ``tool_result`` blocks, Codex's function outputs);
- interrupt markers: ``[Request interrupted by user]`` / ``... for tool use]``, Codex's ``<turn_aborted>``;
- compaction summaries: Claude Code's ``isCompactSummary`` entry ("This session is being continued
  from a previous conversation ..."), and ``isMeta`` entries (caveats the host injects);
- injected context blocks: ``<ide_opened_file>``, ``<ide_selection>``, ``<ide_diagnostics>``,
  ``<system-reminder>``, ``<command-name>`` and the other slash-command and ``!`` shell echoes,
  Codex's ``<environment_context>`` / ``<user_instructions>``. The block is cut out and the text
  the user typed around it is kept; a message that was nothing but blocks is no prompt.

Bounded: only a regular file is read (``/dev/zero``, a FIFO, a folder are skipped without being opened
for reading, so nothing blocks or grows), and only its last ``TAIL_BYTES``.
"""

from __future__ import annotations

import json
import os
import re
import stat
from typing import Any

TAIL_BYTES = 4 << 20
_INJECTED = ("ide_[a-z_]+", "system-reminder", "command-[a-z-]+", "local-command-[a-z-]+", "bash-[a-z-]+",
             "environment_context", "user_instructions", "turn_aborted", "user-prompt-submit-hook")
_BLOCK = re.compile(rf"<({'|'.join(_INJECTED)})\b[^>]*>.*?</\1>", re.DOTALL)
_OPEN_TAG = re.compile(rf"<(?:{'|'.join(_INJECTED)})\b[^>]*>.*\Z", re.DOTALL)  # a block cut off by the tail
_INTERRUPT = re.compile(r"^\[Request interrupted by user[^\]]*\]$")
_CONTINUED = "This session is being continued from a previous conversation"
_VERSION = re.compile(r"^(\d{1,4})\.(\d{1,4})\.(\d{1,6})(?:$|[-+.])")


def last_user_prompt(path: Any) -> str | None:
    """The last prompt the user typed, from a Claude Code or Codex transcript (JSONL); None if none."""
    tail = _read_tail(path)
    if tail is None:
        return None
    for line in reversed(tail.split(b"\n")):
        if b'"user' not in line:  # cheap: most lines are assistant turns and tool output
            continue
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            continue  # the first, cut line of the tail; or a line being written
        text = user_text(entry) if isinstance(entry, dict) else None
        if text:
            return text
    return None


def host_version(path: Any) -> tuple[int, ...] | None:
    """The Claude Code version that is writing this transcript (each entry carries ``"version"``), or None."""
    tail = _read_tail(path)
    if tail is None:
        return None
    for line in reversed(tail.split(b"\n")):
        if b'"version"' not in line:
            continue
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            continue
        match = _VERSION.match(entry.get("version", "")) if isinstance(entry, dict) and \
            isinstance(entry.get("version"), str) else None
        if match:
            return tuple(int(part) for part in match.groups())
    return None


def _read_tail(path: Any) -> bytes | None:
    if not isinstance(path, str) or not path:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except (OSError, ValueError):
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None  # /dev/zero, a FIFO, a socket, a folder: never read
        start = max(0, info.st_size - TAIL_BYTES)
        os.lseek(fd, start, os.SEEK_SET)
        chunks, left = [], TAIL_BYTES
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def user_text(entry: dict[str, Any]) -> str | None:
    """The words the user typed in one transcript entry, or None when it holds none."""
    if entry.get("type") == "user" and isinstance(entry.get("message"), dict):  # Claude Code
        if entry.get("isCompactSummary") or entry.get("isMeta") or entry.get("isVisibleInTranscriptOnly"):
            return None
        content = entry["message"].get("content")
    elif isinstance(entry.get("payload"), dict):  # Codex rollout
        payload = entry["payload"]
        if payload.get("type") == "user_message":
            content = payload.get("message")
        elif payload.get("type") == "message" and payload.get("role") == "user":
            content = payload.get("content")
        else:
            return None
    else:
        return None
    if isinstance(content, list):  # text blocks; tool results are not the user's words
        if any(isinstance(block, dict) and block.get("type") == "tool_result" for block in content):
            return None
        content = " ".join(block.get("text", "") for block in content
                           if isinstance(block, dict) and block.get("type") in ("text", "input_text")
                           and isinstance(block.get("text"), str))
    if not isinstance(content, str):
        return None
    text = " ".join(_OPEN_TAG.sub(" ", _BLOCK.sub(" ", content)).split())
    if not text or _INTERRUPT.match(text) or text.startswith(_CONTINUED):
        return None
    return text
