"""``squeez hook codex``: which Bash calls the Codex CLI hook may rewrite without widening a permission.

Codex reads hooks from ``hooks.json`` (``.codex/hooks.json`` in a project, ``~/.codex/hooks.json``
for the user) and sends the Claude-Code-shaped PreToolUse payload (``tool_name`` ``Bash``,
``tool_input.command``; no ``description``). What Codex's hook engine accepts (openai/codex,
``codex-rs/hooks/src/engine/output_parser.rs``, ``parse_pre_tool_use`` and
``unsupported_pre_tool_use_hook_specific_output``):

- ``updatedInput`` is applied ONLY together with ``permissionDecision: "allow"``; alone it is
  rejected ("PreToolUse hook returned updatedInput without permissionDecision:allow") and the
  original command runs. So every Codex rewrite carries an ``allow``.
- PostToolUse cannot replace a Bash result: its output is ``additionalContext``, ``decision:
  block`` + ``reason``, or ``continue: false`` (``codex-rs/hooks/src/events/post_tool_use.rs``;
  ``updatedMCPToolOutput`` is "unsupported"). There is no replacement path to use instead.

An ``allow`` must never approve what the user's policy would not. So the Codex hook rewrites a
command only when EVERY part of it is a program Codex's own classifier auto-approves under every
approval policy (``is_known_safe_command``, ``codex-rs/shell-command/src/command_safety/
is_safe_command.rs``: ``cat``, ``grep``, ``rg`` without ``--pre``/``--hostname-bin``/``-z``, ``find``
without ``-exec``/``-delete``/``-fprint``..., ``nl``, ``cd``), written as plain words (no ``$``,
backticks, redirections, pipes, subshells, ``VAR=`` or runner prefixes, line breaks; the program
name itself unquoted, as Codex's parser requires), and no Codex execpolicy rules file
(``/etc/codex/rules``, ``$CODEX_HOME/rules``, ``.codex/rules`` in the cwd or any folder above it)
names any of its programs. Test runs,
builds, linters, installers and git are never rewritten for Codex: they keep Codex's approval.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from pathlib import Path

# Programs the hook wraps (patterns.py families) that Codex auto-approves, with the options that
# make Codex ask again (is_safe_command.rs). `cd` only appears as a leading `cd DIR &&`.
_SAFE = {"cat", "grep", "rg", "find", "nl", "cd"}
_UNSAFE_OPTIONS = {
    "find": ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls", "-fprint", "-fprint0", "-fprintf"),
    "rg": ("--pre", "--hostname-bin", "--search-zip", "-z"),
}
# The whole grammar a rewritable command may use: plain words (letters, digits and ``_./:=,@%+^-``),
# '...' and "..." strings without ``$ ` \ !``, spaces and tabs, and the separators ``&&`` ``||`` ``;``.
# Anything else (expansions, globs, redirections, pipes, subshells, comments, line breaks) is refused.
_TOKEN = re.compile(r"""[ \t]+|(&&|\|\||;)|((?:[\w./:=,@%+^-]|'[^']*'|"[^"$`\\!]*")+)""")
_PLAIN_WORD = re.compile(r"[\w./:=,@%+^-]+")
_SYSTEM_HOME = Path("/etc/codex")  # Codex's system config layer: its rules/ folder is read too
_RULES_BYTES = 1 << 20
_RULES_FILES = 64


def codex_auto_approved(command: str, cwd: object = None) -> bool:
    """True when Codex would run ``command`` without asking under any approval policy (see above)."""
    segments = _plain_segments(command)
    if not segments:
        return False
    programs = {words[0] for words in segments}
    if not programs <= _SAFE or any(_unsafe_option(words) for words in segments):
        return False
    if segments[-1][0] == "cd":
        return False  # a lone or trailing cd changes nothing worth wrapping
    return not _named_in_rules(programs - {"cd"}, cwd)


def _plain_segments(command: object) -> list[list[str]] | None:
    """The simple commands of a command written in the plain grammar above, else None."""
    if not isinstance(command, str):
        return None
    segments: list[list[str]] = [[]]
    position = 0
    while position < len(command):
        match = _TOKEN.match(command, position)
        if match is None:
            return None
        position = match.end()
        if match.group(1):
            segments.append([])
        elif match.group(2):
            if not segments[-1] and not _PLAIN_WORD.fullmatch(match.group(2)):
                return None  # Codex reads a program name only as a plain word: 'cat' or c'a't is no `cat` there
            segments[-1].append(shlex.split(match.group(2))[0])  # the word as bash passes it
    if any(not words for words in segments):
        return None  # empty, or an empty part: `a && && b`, a trailing `;`
    return segments


def _unsafe_option(words: list[str]) -> bool:
    bad = _UNSAFE_OPTIONS.get(words[0], ())
    return any(w in bad or any(w.startswith(b + "=") for b in bad if b.startswith("--")) for w in words[1:])


def _named_in_rules(programs: set[str], cwd: object) -> bool:
    """True when a Codex execpolicy rules file might name one of ``programs`` (or cannot be read)."""
    home = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
    folders = [_SYSTEM_HOME / "rules", home / "rules", home / "policy"]
    if isinstance(cwd, str) and cwd:  # the project's layers: every folder from the cwd up to the root
        here = Path(cwd)
        folders.extend(folder / ".codex" / "rules" for folder in (here, *here.parents))
    needles = [f'"{p}"' for p in programs] + [f"'{p}'" for p in programs]
    seen = 0
    for folder in folders:
        try:
            entries = sorted(folder.iterdir())
        except FileNotFoundError:
            continue
        except OSError:
            return True  # a rules folder we cannot list: assume it names the command
        for entry in entries:
            seen += 1
            if seen > _RULES_FILES:
                return True
            text = _read_rules(entry)
            if text is None or any(n in text for n in needles):
                return True
    return False


def _read_rules(path: Path) -> str | None:
    """A rules file's text (regular files only, bounded); "" for what is no rules file; None if unreadable."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            return "" if stat.S_ISDIR(info.st_mode) else None
        if info.st_size > _RULES_BYTES:
            return None
        with open(path, "rb") as handle:
            return handle.read(_RULES_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
