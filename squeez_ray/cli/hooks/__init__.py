"""The agents' hooks: PreToolUse wraps long-output shell commands in ``squeez run``; PostToolUse prunes
Claude Code's built-in Read and Grep results in their own shape.

    patterns.py     which commands are wrapped, which are left alone (shared with ``squeez report``)
    claude_code.py  the payload -> rewrite logic and ``squeez hook claude-code``
    builtin_tools.py  PostToolUse for Claude Code's Read and Grep: ``updatedToolOutput`` in the tool's shape
    codex.py        the Codex CLI differences: which commands Codex runs without asking anyway
    permissions.py  Claude Code's permission rules: commands a rule could see are left alone
    transcript.py   the user's last real prompt, from the session transcript, in bounded memory
    shell.py        commands that need the agent's own shell (aliases, functions, unknown programs)
    raw.py          the escape hatch: SQUEEZ_RAW / ``# squeez:raw``, per call and per session
    install.py      ``squeez install|uninstall claude-code|codex``: merging into the settings files
"""
