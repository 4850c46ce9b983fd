"""When a re-prune rerun must redo a unit: its output is missing or damaged, its input changed since
the done record was written (an agent session that kept appending), or some of its observations
failed in the backend (a server that was down). Anything else is skipped, however often the job is
rerun."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

STATE_DIR = ".reprune-state"  # done-markers and temporary directories, inside the output tree
_CHUNK = 1 << 20


def input_digest(path: Path) -> str | None:
    """SHA-256 of a unit's input: a file's bytes, or a directory's relative paths and file contents."""
    if path.is_symlink():
        return None
    if path.is_dir():
        whole = hashlib.sha256()
        for file in sorted(path.rglob("*")):
            if file.is_file() and not file.is_symlink():
                whole.update(file.relative_to(path).as_posix().encode() + b"\0")
                whole.update(bytes.fromhex(_file_digest(file)))
        return whole.hexdigest()
    return _file_digest(path) if path.is_file() else None


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def redo_reason(output_dir: str, input_dir: str, unit: str) -> str | None:
    """None when ``unit`` is done, else why it must be (re)done."""
    record = is_done(output_dir, unit)
    if record is None:
        return "new"
    if record.get("input_sha256") != input_digest(Path(input_dir) / unit):
        return "input changed"
    if record.get("failed"):
        return "retrying failed observations"
    return None


def marker_path(output_dir: str, unit: str) -> Path:
    return Path(output_dir) / STATE_DIR / "done" / f"{unit}.json"


def file_sha256(path: Path) -> str | None:
    if not path.is_file():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()


def is_done(output_dir: str, unit: str) -> dict[str, Any] | None:
    """The marker's stats when ``unit``'s output exists and matches it, else None (redo the unit)."""
    marker = marker_path(output_dir, unit)
    if not marker.is_file():
        return None
    try:
        stats = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    target = Path(output_dir) / unit
    if not target.exists():
        return None
    if target.is_file() and stats.get("output_sha256") != file_sha256(target):
        return None
    return stats
