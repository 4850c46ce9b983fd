"""Claude Code's permission rules and the rewritten command: leave alone what a rule could see.

Claude Code applies a PreToolUse hook's ``updatedInput`` BEFORE its permission engine matches the
allow / ask / deny rules, and matches them against the rewritten command (anthropics/claude-code#89448,
"the rules are matched against the **rewritten** command. A deny rule written against the command the
user actually typed therefore never fires"). A ``deny`` for ``Bash(git push:*)`` would not see
``squeez run Q -- bash -c 'pytest; git push'``; an ``allow`` for ``Bash(pytest:*)`` would stop
matching (a new prompt); an ``allow`` that names squeez, ``bash`` or ``-c`` would start matching.

So the hook rewrites a command only when no configured rule could tell the two apart: every
``Bash(...)`` rule in allow, ask or deny whose literal words (the specifier without its ``*``
wildcards and legacy ``:*``) all occur among the words of the command (as written, and as the
shell reads them: ``g'i't push`` and ``\\git push`` are ``git push``) or of the squeez invocation,
or whose first word occurs there in a command with a ``$`` expansion that could supply the rest
(``git $x``, ``git ${X:-push}``), leaves the command alone; so does a Read/Edit/Write deny or ask rule whose file name occurs in the
command (Claude Code may check shell reads against them). A bare ``Bash`` or ``Bash(*)`` matches the
original and the rewrite alike and changes nothing. Settings read (the documented places,
https://code.claude.com/docs/en/settings): the managed file, ``~/.claude/settings.json``, and
``.claude/settings.json`` / ``.claude/settings.local.json`` in ``$CLAUDE_PROJECT_DIR`` and in the
call's ``cwd`` and each folder above it. A settings file that cannot be read or parsed (not a regular
file, over 4 MiB, not JSON, nested too deep) means "a rule might match": the command is left alone.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_SETTINGS_BYTES = 4 << 20
_MANAGED = ("/etc/claude-code/managed-settings.json",
            "/Library/Application Support/ClaudeCode/managed-settings.json")
_WORD_START = r"""(?<![^\s;&|()<>`'"{}])"""
_WORD_END = r"""(?![^\s;&|()<>`'"{}])"""
_EXPANSION = re.compile(r"""\$[{'"\w@*#?!$-]""")
_FILE_TOOLS = ("Read", "Edit", "Write", "MultiEdit", "NotebookEdit")


class Unreadable(Exception):
    """A settings file exists but cannot be trusted to hold no rule."""


def rules_could_see(command: str, invocation_words: Iterable[str], cwd: Any = None) -> bool:
    """True when a configured Claude Code rule could match ``command`` or its rewrite differently."""
    try:
        rules = list(configured_rules(cwd))
    except Unreadable:
        return True
    # The command as written and as the shell reads it: g'i't, "git" and \\git all run git.
    spelled = command + "\n" + " ".join(_shell_words(command))
    text = spelled + "\n" + " ".join(invocation_words)
    expands = bool(_EXPANSION.search(command))  # $x, ${..}, $'..': words the hook cannot read before bash runs
    for kind, rule in rules:
        tool, _, spec = rule.partition("(")
        spec = spec[:-1] if spec.endswith(")") else spec
        if tool == "Bash" and spec.strip() and _bash_rule_could_match(spec, text, expands):
            return True
        if tool in _FILE_TOOLS and kind in ("deny", "ask") and _file_rule_could_match(spec, spelled):
            return True
    return False


def _shell_words(command: str) -> list[str]:
    """The command's words with quotes and backslashes removed, as bash passes them (none if unreadable)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return []


def _bash_rule_could_match(spec: str, text: str, expands: bool = False) -> bool:
    """Every word of the rule (``*`` as any text) occurs in ``text`` as a word or, at a ``*``, a part of one;
    with ``expands``, the rule's first word suffices (an expansion could supply the others: ``git $x``)."""
    spec = spec[:-2] if spec.endswith(":*") else spec
    words = [w for w in spec.split() if w.strip("*")]
    if not words:
        return False  # `Bash(*)`: matches the original and the rewrite alike
    for position, word in enumerate(words):
        body = ".*".join(re.escape(piece) for piece in word.split("*"))
        start = "" if word.startswith("*") else _WORD_START
        end = "" if word.endswith("*") else _WORD_END
        if not re.search(start + body + end, text) and (position == 0 or not expands):
            return False
    return True


def _file_rule_could_match(spec: str, command: str) -> bool:
    name = spec.rstrip("/*").rsplit("/", 1)[-1].split("*", 1)[0]
    return bool(name) and name in command


def configured_rules(cwd: Any = None) -> Iterable[tuple[str, str]]:
    """(``allow``/``ask``/``deny``, rule) for every permission rule in the settings Claude Code reads."""
    for path in _settings_files(cwd):
        data = _load(path)
        if data is not None and not isinstance(data, dict):
            raise Unreadable(path)
        permissions = data.get("permissions") if data else None
        if permissions is None:
            continue
        if not isinstance(permissions, dict):
            raise Unreadable(path)
        for kind in ("allow", "ask", "deny"):
            rules = permissions.get(kind, [])
            if not isinstance(rules, list):
                raise Unreadable(path)
            for rule in rules:
                if not isinstance(rule, str):
                    raise Unreadable(path)
                yield kind, rule.strip()


def _settings_files(cwd: Any) -> list[Path]:
    paths = [Path(p) for p in _MANAGED] + [Path.home() / ".claude" / "settings.json"]
    folders = []
    if os.environ.get("CLAUDE_PROJECT_DIR"):
        folders.append(Path(os.environ["CLAUDE_PROJECT_DIR"]))
    if isinstance(cwd, str) and cwd:
        here = Path(cwd)
        folders.extend([here, *here.parents])
    for folder in folders:
        paths += [folder / ".claude" / "settings.json", folder / ".claude" / "settings.local.json"]
    return list(dict.fromkeys(paths))


def _load(path: Path) -> Any:
    """The file's JSON; None when there is no such file; raises Unreadable for anything doubtful."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    except OSError as error:
        if isinstance(error, NotADirectoryError):
            return None
        raise Unreadable(path) from None
    if not stat.S_ISREG(info.st_mode) or info.st_size > _SETTINGS_BYTES:
        raise Unreadable(path)
    try:
        with open(path, "rb") as handle:
            text = handle.read(_SETTINGS_BYTES + 1)
        return json.loads(text) if text.strip() else None
    except (OSError, ValueError, RecursionError):
        raise Unreadable(path) from None
