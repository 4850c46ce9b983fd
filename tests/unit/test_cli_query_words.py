"""A piped query may start with a subcommand word (`pytest | squeez show the failures`): the piped output
must still come back, and the real subcommands must still work with input piped in. Real subprocesses of
the installed entry point, as in test_cli_prune.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from test_cli_prune import SQUEEZ, answer_lines, make_log, squeez


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No user config, a private store, BM25 (no flag, so the words alone decide the route)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SQUEEZ_", "XDG_"))}
    clean["SQUEEZ_DAEMON"] = "0"  # every call prunes in its own process: no warm one outlives the test
    clean.update(HOME=str(tmp_path / "home"), SQUEEZ_STORE=str(tmp_path / "store"), SQUEEZ_BACKEND="bm25")
    return clean


def _ident(stdout: bytes) -> str:
    return answer_lines(stdout)[1].rsplit(b"squeez show ", 1)[1].rstrip(b"]").decode()


@pytest.mark.parametrize("words", [
    ["show", "the", "failures"],  # not an id
    ["show"],  # no id at all
    ["show", "added", "errors"],  # an id-shaped word, then more words
    ["run", "the", "tests", "again"],  # no `--`
    ["report", "the", "errors"],  # no such files
    ["hook", "errors"], ["install", "errors"], ["uninstall", "the", "old", "one"],  # not a host
    ["mcp", "server", "errors"],  # mcp takes no words
    ["eval", "the", "errors"],  # not key=value words
])
def test_a_piped_query_that_starts_with_a_subcommand_word_is_the_query(env, words):
    data = make_log()
    out = squeez(words, data, env)
    quoted = squeez([" ".join(words)], data, env)  # what the user meant
    assert out.returncode == 0, out.stderr
    assert out.stdout == quoted.stdout and b"(bm25); full output: squeez show" in out.stdout, out.stderr
    assert f"is not a `squeez {words[0]}` command line".encode() in out.stderr, out.stderr
    assert b"Traceback" not in out.stderr


def test_with_flags_among_the_words_they_are_the_pipe_s_flags(env):
    out = squeez(["show", "--json", "the", "failures"], make_log(), env)
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert payload["total_lines"] == 61 and payload["store_id"]


def test_a_misread_line_over_an_empty_pipe_is_the_subcommand_s_usage_error(env):
    """Nothing was piped, so nothing can be lost: exit 2 and say what the subcommand wanted."""
    out = squeez(["run", "q", "pytest"], b"", env)
    assert out.returncode == 2 and out.stdout == b"", out.stderr
    assert b"`--`" in out.stderr and b"is not a `squeez run` command line" in out.stderr


def test_without_piped_input_a_bad_subcommand_line_is_the_subcommand_s_error(env):
    out = subprocess.run([str(SQUEEZ), "show", "not-an-id"], stdin=subprocess.DEVNULL, capture_output=True,
                         env=env, timeout=60, check=False)
    assert out.returncode == 1 and b"is not a store id" in out.stderr


def test_real_subcommands_still_work_with_input_piped_in(env, tmp_path):
    data = make_log()
    ident = _ident(squeez(["error"], data, env).stdout)
    shown = squeez(["show", ident, "--lines", "42-43"], b"anything piped\n" * 30, env)
    assert shown.returncode == 0 and shown.stdout == b"".join(data.splitlines(keepends=True)[41:43]), shown.stderr
    assert squeez(["show", ident[:6]], b"x\n", env).stdout == data
    # `squeez run`'s command inherits the piped stdin
    ran = squeez(["run", "which line is 42", "--", "bash", "-c", "cat; exit 3"], data, env)
    assert ran.returncode == 3 and b"ERROR module_42.c:17" in ran.stdout, ran.stderr
    installed = squeez(["install", "claude-code", "--project", "--dir", str(tmp_path)], b"x\n", env)
    assert installed.returncode == 0 and (tmp_path / ".claude" / "settings.json").is_file(), installed.stderr
    hook = {"session_id": "s", "transcript_path": None, "cwd": str(tmp_path), "permission_mode": "default",
            "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "t",
            "tool_input": {"command": "pytest -q", "description": "Run the tests"}}
    answered = squeez(["hook", "claude-code"], json.dumps(hook).encode(), env)
    assert answered.returncode == 0, answered.stderr
    assert " run " in json.loads(answered.stdout)["hookSpecificOutput"]["updatedInput"]["command"]
