"""An independent check of a write-back: parse input and output, walk both, and allow differences
only in string values at the format's observation paths. The job runs it on every file before
writing (a file that fails is copied unchanged and reported), and the tests run it on every output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Path_ = tuple[Any, ...]
_ANY = "*"  # matches any list index

# Where each format keeps observation text (and its copies); every other value must stay equal.
ALLOWED: dict[str, list[Path_]] = {
    "swe-agent": [("trajectory", _ANY, "observation"), ("history", _ANY, "content"),
                  ("history", _ANY, "content", _ANY, "text"),
                  ("trajectory", _ANY, "messages", _ANY, "content"), ("trajectory", _ANY, "query", _ANY, "content"),
                  ("trajectory", _ANY, "messages", _ANY, "content", _ANY, "text"),
                  ("trajectory", _ANY, "query", _ANY, "content", _ANY, "text")],
    "mini-swe-agent": [("messages", _ANY, "content"), ("messages", _ANY, "extra", "raw_output")],
    "openhands": [(_ANY, "content"), ("history", _ANY, "content"),
                  ("history", _ANY, "observation", "content", _ANY, "text")],  # V1 events in a benchmark row
    "openhands-v1": [("observation", "content", _ANY, "text")],
    "claude-code": [("message", "content", _ANY, "content"), ("message", "content", _ANY, "content", _ANY, "text"),
                    ("toolUseResult", "stdout")],
    "codex": [("output",), ("payload", "output")],
}
_JSONL = {"claude-code", "codex"}


def diff(before: Any, after: Any, path: Path_ = ()) -> tuple[list[Path_], list[str]]:
    """(paths of string values that differ, structural differences described in words)."""
    if type(before) is not type(after):
        return [], [f"{_show(path)}: type {type(before).__name__} became {type(after).__name__}"]
    if isinstance(before, dict):
        if list(before) != list(after):
            return [], [f"{_show(path)}: keys changed"]
        changed, problems = [], []
        for key in before:
            c, p = diff(before[key], after[key], (*path, key))
            changed += c
            problems += p
        return changed, problems
    if isinstance(before, list):
        if len(before) != len(after):
            return [], [f"{_show(path)}: length {len(before)} became {len(after)}"]
        changed, problems = [], []
        for i, (x, y) in enumerate(zip(before, after)):
            c, p = diff(x, y, (*path, i))
            changed += c
            problems += p
        return changed, problems
    if before != after:
        return ([path], []) if isinstance(before, str) else ([], [f"{_show(path)}: {before!r} became {after!r}"])
    return [], []


def _matches(path: Path_, pattern: Path_) -> bool:
    return len(path) == len(pattern) and all(p == _ANY and isinstance(k, int) or p == k
                                             for k, p in zip(path, pattern))


def _show(path: Path_) -> str:
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path) or "<root>"


def check_values(format_name: str, before: Any, after: Any, where: str = "") -> list[str]:
    changed, problems = diff(before, after)
    allowed = ALLOWED[format_name]
    problems += [f"{_show(p)}: a string outside the observation fields changed" for p in changed
                 if not any(_matches(p, pattern) for pattern in allowed)]
    return [f"{where}{p}" for p in problems]


def check_file(format_name: str, original: bytes, written: bytes) -> list[str]:
    """Problems with ``written`` as a re-pruned copy of ``original`` (empty list: only observations changed)."""
    before_text, after_text = original.decode("utf-8"), written.decode("utf-8")
    if format_name in _JSONL or (format_name == "openhands" and not before_text.lstrip().startswith("[")):
        before_lines, after_lines = before_text.split("\n"), after_text.split("\n")
        if len(before_lines) != len(after_lines):
            return [f"line count {len(before_lines)} became {len(after_lines)}"]
        problems = []
        for number, (b, a) in enumerate(zip(before_lines, after_lines), start=1):
            if b == a:
                continue
            if b[len(b.rstrip("\r")):] != a[len(a.rstrip("\r")):]:
                problems.append(f"line {number}: line ending changed")
            try:
                problems += check_values(format_name, json.loads(b), json.loads(a), f"line {number}")
            except json.JSONDecodeError as error:
                problems.append(f"line {number}: not JSON after writing ({error.msg})")
        return problems
    try:
        return check_values(format_name, json.loads(before_text), json.loads(after_text))
    except json.JSONDecodeError as error:
        return [f"not JSON after writing ({error.msg})"]


def check_written(format_name: str, source: Path, dumped: bytes | dict[str, bytes]) -> list[str]:
    """``check_file`` for a file unit, or for each rewritten file of a directory unit."""
    if isinstance(dumped, bytes):
        return check_file(format_name, source.read_bytes(), dumped)
    problems = []
    for relative, data in dumped.items():
        problems += [f"{relative}: {p}" for p in check_file(format_name, (source / relative).read_bytes(), data)]
    return problems
