"""``squeez hook|install|uninstall claude-code|codex``: the hook entry point and its settings files.

``install`` merges one PreToolUse handler (matcher ``Bash``) into the host's settings, and for
Claude Code one PostToolUse handler (matcher ``Read|Grep``, builtin_tools.py), keeping every
other key and hook; running it again changes nothing (or only refreshes our own command).
``uninstall`` removes only handlers whose command is ``... squeez ... hook HOST``. Writes are
atomic (temporary file + rename), so an interrupted install never leaves a half-written file; a
symlinked settings file is written through (the link stays a link) and keeps its mode.

    claude-code  --project: ./.claude/settings.json   --user: ~/.claude/settings.json
    codex        --project: ./.codex/hooks.json       --user: $CODEX_HOME/hooks.json (~/.codex)
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any

from squeez_ray.cli.hooks.claude_code import hook_main, squeez_invocation
from squeez_ray.cli.pipe import EXIT_OK, EXIT_USAGE, note
from squeez_ray.io_utils import write_bytes_atomic

HOSTS = ("claude-code", "codex")
HOOK_TIMEOUT_S = 30  # the hook answers in well under a second; a stuck one must not hold the agent long
# Claude Code also gets a PostToolUse handler for its built-in Read and Grep (builtin_tools.py); Codex's
# PostToolUse cannot replace a result (docs/CLI.md), so it gets none.
EVENTS = {"claude-code": (("PreToolUse", "Bash"), ("PostToolUse", "Read|Grep")),
          "codex": (("PreToolUse", "Bash"),)}
_OURS = re.compile(r"squeez.*\shook\s+(claude-code|codex)\s*$")


class InstallError(Exception):
    """A settings file we must not overwrite (not JSON, not the documented shape)."""


def build_parser(verb: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"squeez {verb}", description={
        "hook": "Answer one hook payload on stdin (run by the agent, not by you).",
        "install": "Add squeez's hooks to the agent's settings (idempotent): PreToolUse for Bash, and "
                   "for Claude Code PostToolUse for its Read and Grep.",
        "uninstall": "Remove squeez's hooks from the agent's settings."}[verb])
    parser.add_argument("host", choices=HOSTS)
    if verb != "hook":
        where = parser.add_mutually_exclusive_group()
        where.add_argument("--project", action="store_true", help="this project's settings (the default)")
        where.add_argument("--user", action="store_true", help="your user settings, for every project")
        parser.add_argument("--dir", default=".", help="the project folder (default: the current one)")
    return parser


def hooks_main(argv: list[str]) -> int:
    verb = argv[0]
    args = build_parser(verb).parse_args(argv[1:])
    if verb == "hook":
        return hook_main(args.host)
    path = settings_path(args.host, user=args.user, project_dir=args.dir)
    try:
        changed = (install if verb == "install" else uninstall)(path, args.host)
    except (InstallError, OSError) as error:
        note(str(error))
        return EXIT_USAGE
    except RecursionError:
        note(f"{path} is nested too deeply to be a settings file; nothing was changed")
        return EXIT_USAGE
    did = {"install": "installed in", "uninstall": "removed from"}[verb]
    note(f"{args.host} hook {did} {path}" if changed else
         f"nothing to do: the {args.host} hook is {'already' if verb == 'install' else 'not'} in {path}")
    if verb == "install" and args.host == "codex":
        note("codex: only searches and file reads that Codex runs without asking anyway (cat, grep, rg, find, "
             "nl) are wrapped; tests, builds and the rest keep Codex's approval; see docs/CLI.md")
    return EXIT_OK


def settings_path(host: str, *, user: bool, project_dir: str = ".") -> Path:
    if host == "claude-code":
        base = Path.home() / ".claude" if user else Path(project_dir) / ".claude"
        return base / "settings.json"
    base = Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") if user else Path(project_dir) / ".codex"
    return base / "hooks.json"


def hook_command(host: str) -> str:
    return f"{squeez_invocation()} hook {host}"


def install(path: Path, host: str) -> bool:
    """Add our handlers; True when the file changed."""
    data = _load(path)
    before = json.dumps(data, sort_keys=True)
    for event, matcher in EVENTS[host]:
        groups = _remove_ours(data, host, event)
        groups.append({"matcher": matcher, "hooks": [{"type": "command", "command": hook_command(host),
                                                      "timeout": HOOK_TIMEOUT_S}]})
    if json.dumps(data, sort_keys=True) == before:
        return False
    _save(path, data)
    return True


def uninstall(path: Path, host: str) -> bool:
    """Remove our handlers only; True when the file changed."""
    if not path.exists():
        return False
    data = _load(path)
    before = json.dumps(data, sort_keys=True)
    for event in ("PreToolUse", "PostToolUse"):
        if not _remove_ours(data, host, event):  # we emptied it: leave no empty shells behind
            data["hooks"].pop(event, None)
    if not data["hooks"]:
        data.pop("hooks")
    if json.dumps(data, sort_keys=True) == before:
        return False
    _save(path, data)
    return True


def _remove_ours(data: dict[str, Any], host: str, event: str = "PreToolUse") -> list[Any]:
    """Drop our handlers (and groups left empty by that) from hooks.EVENT; returns that list."""
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InstallError("'hooks' is not an object in the settings file; fix it by hand first")
    groups = hooks.setdefault(event, [])
    if not isinstance(groups, list):
        raise InstallError(f"'hooks.{event}' is not a list in the settings file; fix it by hand first")
    kept = []
    for group in groups:
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list):
            kept.append(group)
            continue
        mine = [h for h in handlers if isinstance(h, dict) and _is_ours(h.get("command"), host)]
        if not mine:
            kept.append(group)
        elif len(mine) < len(handlers):
            kept.append({**group, "hooks": [h for h in handlers if h not in mine]})
    groups[:] = kept
    return groups


def _is_ours(command: Any, host: str) -> bool:
    match = _OURS.search(command) if isinstance(command, str) else None
    return bool(match and match.group(1) == host)


def _load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as error:
        raise InstallError(f"cannot read {path}: {error}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as error:
        raise InstallError(f"{path} is not valid JSON ({error}); fix it by hand first, nothing was changed") \
            from None
    except RecursionError:
        raise InstallError(f"{path} is nested too deeply to be a settings file; nothing was changed") from None
    if not isinstance(data, dict):
        raise InstallError(f"{path} does not hold a JSON object; nothing was changed")
    return data


def _save(path: Path, data: dict[str, Any]) -> None:
    """Atomic (temporary file + rename) in the folder of the file the path names: a symlinked
    settings file (dotfiles) is written through, the link is kept, and so is the file's mode."""
    try:
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    except RecursionError:
        raise InstallError(f"{path} is nested too deeply to be a settings file; nothing was changed") from None
    target = Path(os.path.realpath(path))
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    write_bytes_atomic(target, text.encode("utf-8"))
    if mode is not None:
        os.chmod(target, mode)
