"""``squeez hook codex``: the Claude Code hook (claude_code.py) with Codex CLI's two differences.

Codex reads hooks from ``hooks.json`` (``.codex/hooks.json`` in a project, ``~/.codex/hooks.json``
for the user) in the same event -> matcher -> handlers shape, and sends the same PreToolUse payload
(``tool_name`` ``Bash``, ``tool_input.command``; no ``description``, so the query comes from the
command and the user's last prompt in the rollout transcript).

1. Codex applies ``updatedInput`` only together with ``permissionDecision: "allow"``, so the
   rewrite carries it, and that approves the wrapped command without Codex's prompt. The trade-off
   (docs/CLI.md): only the families that read or check (tests, builds, linters, searches, git
   history, file reads) are wrapped for Codex; package installers are never rewritten there, so
   they keep their approval prompt.
2. Codex treats unknown output fields as a failed hook: the reply holds only documented fields.
"""

from __future__ import annotations

from typing import Any

from squeez_ray.cli.hooks.claude_code import rewrite


def codex_rewrite(payload: Any, settings: Any = None) -> dict[str, Any] | None:
    return rewrite(payload, "codex", settings)
