"""Commands that need the agent's own shell: its aliases and functions are not in ``bash -c``.

The rewrite runs the command in a fresh ``bash -c`` under ``squeez run``; the agent's shell has
aliases and functions that one does not (Claude Code sources a snapshot of the user's shell,
``~/.claude/shell-snapshots/snapshot-*.sh``, before each command). ``alias pytest='python -m pytest'``
then became ``bash: pytest: command not found``, exit 127 (issue 37 item 4). Running the command
"as the agent's shell would" would mean sourcing that snapshot inside squeez's child, which runs
the user's shell setup a second time; instead the hook leaves such commands alone:

a part whose first word (after ``VAR=value`` assignments) is an alias or a function in any of the
newest Claude Code shell snapshots (but not a colour-only alias such as ``grep='grep --color=auto'``),
or is neither a shell builtin nor a program on PATH (``shutil.which``; a path must name an executable
file, relative paths from the call's ``cwd``), is not wrapped.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
from pathlib import Path
from typing import Any

_BUILTINS = frozenset("""
. : [ alias bg bind break builtin caller cd command compgen complete compopt continue declare dirs disown echo
enable eval exec exit export false fc fg getopts hash help history jobs kill let local logout mapfile popd printf
pushd pwd read readarray readonly return set shift shopt source suspend test time times trap true type typeset
ulimit umask unalias unset wait
""".split())
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
_ALIAS = re.compile(r"^\s*alias\s+(?:--\s+)?([^=\s]+)=(.*)$", re.MULTILINE)
_FUNCTION = re.compile(r"^\s*(?:function\s+([^\s(){}]+)|([^\s(){}=]+)\s*\(\))", re.MULTILINE)
_SNAPSHOT_BYTES = 2 << 20
_SNAPSHOTS = 20


def needs_agent_shell(segments: list[list[str]], cwd: Any = None) -> bool:
    """True when a part of the command starts with a name only the agent's shell can resolve."""
    defined = None
    for words in segments:
        first = next((w for w in words if not _ASSIGNMENT.match(w)), None)
        if first is None:
            continue
        if "/" in first:
            path = Path(first) if os.path.isabs(first) or not isinstance(cwd, str) else Path(cwd) / first
            if not (path.is_file() and os.access(path, os.X_OK)):
                return True
            continue
        if defined is None:
            defined = snapshot_names()
        if first in defined:
            return True
        if first not in _BUILTINS and shutil.which(first) is None:
            return True
    return False


def snapshot_names(home: Path | None = None) -> set[str]:
    """Aliases and functions defined in the newest Claude Code shell snapshots (bounded reads)."""
    folder = (home or Path.home()) / ".claude" / "shell-snapshots"
    try:
        entries = [e for e in os.scandir(folder) if e.name.endswith(".sh")]
    except OSError:
        return set()
    entries.sort(key=lambda e: _mtime(e), reverse=True)
    names: set[str] = set()
    for entry in entries[:_SNAPSHOTS]:
        text = _read_regular(entry.path)
        names.update(m.group(1) or m.group(2) for m in _FUNCTION.finditer(text))
        names.update(m.group(1) for m in _ALIAS.finditer(text) if not _only_colour(m.group(1), m.group(2)))
    return names


def _only_colour(name: str, value: str) -> bool:
    """``alias grep='grep --color=auto'`` (a distribution default): the same program, and no colour
    when the output is not a terminal, so the fresh ``bash -c`` runs it the same way."""
    try:
        words = shlex.split(value)
        words = shlex.split(words[0]) if len(words) == 1 else words
    except ValueError:
        return False
    return bool(words) and words[0] == name and all(w.startswith(("--color", "--colour")) for w in words[1:])


def _mtime(entry: os.DirEntry) -> float:
    try:
        return entry.stat().st_mtime
    except OSError:
        return 0.0


def _read_regular(path: str) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.read(fd, _SNAPSHOT_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
