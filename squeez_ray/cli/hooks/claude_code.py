"""``squeez hook claude-code``: Claude Code's PreToolUse hook, wrapping long-output Bash calls in ``squeez run``.

Claude Code runs the hook with the tool call as JSON on stdin (``tool_name``, ``tool_input`` with
``command`` / ``description`` / ``timeout`` / ``run_in_background``, ``transcript_path``, ``cwd``
...). For a Bash call that patterns.py says to wrap, the hook answers::

    {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                            "updatedInput": {...tool_input, "command": "squeez run 'QUERY' -- bash -c '...'"}}}

and nothing else: no ``permissionDecision`` (the documented schema:
https://code.claude.com/docs/en/hooks#pretooluse, "PreToolUse decision control": ``updatedInput``
modifies the tool's input before it runs; ``permissionDecision`` is optional). Claude Code matches
its permission rules against the rewritten command, so a command any configured rule could see is
left alone (permissions.py). Every other call gets no output.

A ``PostToolUse`` payload (Claude Code's built-in Read and Grep) goes to builtin_tools.py instead.

The hook must never block a tool call: on any error (malformed JSON, an unexpected shape, a
transcript it cannot read, a bug) it prints nothing and exits 0.

The query is what the agent said it is doing (the Bash ``description``), enriched with the
session's last real user prompt from the transcript when there is one (transcript.py: never an
interrupt marker, a compaction summary, a tool result or an IDE context block).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from typing import TYPE_CHECKING, Any

from squeez_ray.cli.hooks.builtin_tools import post_tool_use
from squeez_ray.cli.hooks.codex import codex_auto_approved
from squeez_ray.cli.hooks.patterns import should_wrap, simple_commands, split_cd_prefix
from squeez_ray.cli.hooks.permissions import rules_could_see
from squeez_ray.cli.hooks.raw import raw_requested
from squeez_ray.cli.hooks.shell import needs_agent_shell
from squeez_ray.cli.hooks.transcript import last_user_prompt

if TYPE_CHECKING:  # for the annotation only: the hooks import settings when they run, so their start stays light
    from squeez_ray.cli.settings import Settings

_PROMPT_CHARS = 300
_QUERY_CHARS = 600
_RUN_WORDS = ("squeez", "run", "--", "bash", "-c")
# Linux caps ONE argument at 128 KiB (MAX_ARG_STRLEN) and the host passes the whole command as one
# (`bash -c CMD`): a rewrite past this (quoting turns each ' into 5 bytes) would not start at all.
_REWRITE_BYTES = 64 << 10


def hook_main(host: str, stdin: Any = None, stdout: Any = None) -> int:
    """Read one payload, print the rewrite (or nothing). Always exits 0."""
    stdin = sys.stdin if stdin is None else stdin
    stdout = sys.stdout if stdout is None else stdout
    try:
        payload = json.loads(stdin.read())
        if host == "claude-code" and isinstance(payload, dict) and payload.get("hook_event_name") == "PostToolUse":
            reply = post_tool_use(payload)
        else:
            reply = rewrite(payload, host)
        if reply is not None:
            stdout.write(json.dumps(reply) + "\n")
            stdout.flush()
    except Exception:  # noqa: BLE001, S110 - never block the agent's tool call: no output means "unchanged"
        pass
    return 0


def rewrite(payload: Any, host: str, settings: Settings | None = None) -> dict[str, Any] | None:
    """The hook's answer for ``payload`` (Claude Code or Codex), or None to leave the call unchanged."""
    if not isinstance(payload, dict) or payload.get("tool_name") not in ("Bash", "shell", "local_shell"):
        return None
    if payload.get("hook_event_name", "PreToolUse") != "PreToolUse":
        return None
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict) or tool_input.get("run_in_background"):
        return None
    command, put_back = _command_of(tool_input.get("command"))
    if command is None or raw_requested(command, payload.get("session_id")):  # the escape hatch (raw.py)
        return None
    # Codex applies a rewrite only with permissionDecision "allow" (codex.py): only commands Codex
    # itself runs without asking, under any approval policy, may get one.
    if host == "codex" and not codex_auto_approved(command, payload.get("cwd")):
        return None
    settings = _settings() if settings is None else settings
    patterns = getattr(settings, "hook_patterns", None)
    prefix, rest = split_cd_prefix(command)  # `cd DIR && CMD`: the cd stays in the agent's shell
    if should_wrap(rest, patterns) is None:
        return None
    if needs_agent_shell(simple_commands(rest) or [], payload.get("cwd")):
        return None  # an alias, a function or an unknown program: a fresh `bash -c` would not find it
    invocation = squeez_invocation()
    # Claude Code matches its permission rules against the rewritten command (permissions.py).
    if host == "claude-code" and rules_could_see(command, [*shlex.split(invocation), *_RUN_WORDS],
                                                 payload.get("cwd")):
        return None
    query = build_query(tool_input.get("description"), rest, payload.get("transcript_path"))
    wrapped = f"{prefix}{invocation} run {shlex.quote(query)} -- bash -c {shlex.quote(rest)}"
    if len(wrapped.encode("utf-8", "surrogatepass")) > _REWRITE_BYTES:
        return None  # too long to pass on as one argument: the original runs as it would have
    output: dict[str, Any] = {"hookEventName": "PreToolUse"}
    if host == "codex":
        output["permissionDecision"] = "allow"
    output["updatedInput"] = {**tool_input, "command": put_back(wrapped)}
    return {"hookSpecificOutput": output}


def _command_of(value: Any) -> tuple[str | None, Any]:
    """The shell command string, and how to put a rewritten one back in the same shape.

    Claude Code sends a string; some Codex versions send argv such as ``["bash", "-lc", "CMD"]``.
    """
    if isinstance(value, str):
        return value, lambda new: new
    if isinstance(value, list) and len(value) == 3 and all(isinstance(v, str) for v in value) \
            and os.path.basename(value[0]) in ("bash", "sh", "zsh") and value[1] in ("-c", "-lc"):
        return value[2], lambda new: [value[0], value[1], new]
    return None, None


def build_query(description: Any, command: str, transcript_path: Any) -> str:
    """The agent's own description of the call, plus the user's last request when the transcript has one."""
    parts = []
    if isinstance(description, str) and description.strip():
        parts.append(description.strip())
    else:
        parts.append(f"the important lines of the output of: {command[:200]}")
    prompt = last_user_prompt(transcript_path)
    if prompt:
        parts.append(f"(task: {prompt[:_PROMPT_CHARS]})")
    # A leading "-" would read as an option of `squeez run` and stop the command: never start with one.
    return " ".join(" ".join(parts).split())[:_QUERY_CHARS].lstrip("- ") or "the important lines"


def squeez_invocation() -> str:
    """How the rewritten command calls squeez: this very installation, by absolute path."""
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.basename(script) == "squeez" and os.access(script, os.X_OK):
        return shlex.quote(script)
    return f"{shlex.quote(sys.executable)} -m squeez_ray.cli"


def _settings() -> Settings:
    from squeez_ray.cli import settings as settings_mod

    return settings_mod.resolve()
