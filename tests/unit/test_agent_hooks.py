"""The Claude Code / Codex PreToolUse hooks: which calls are rewritten, the reply's shape, the installers.

Payload fixtures follow the documented PreToolUse input (https://code.claude.com/docs/en/hooks,
"PreToolUse input": session_id, transcript_path, cwd, permission_mode, hook_event_name, tool_name,
tool_input{command, description, timeout, run_in_background}, tool_use_id).
"""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_prune import SQUEEZ, env  # noqa: F401 - env is a fixture

from squeez_ray.cli import settings as settings_mod
from squeez_ray.cli.hooks.claude_code import hook_main, last_user_prompt, rewrite
from squeez_ray.cli.hooks.install import install, uninstall
from squeez_ray.cli.hooks.patterns import should_wrap, split_cd_prefix
from squeez_ray.config import ConfigError


# Programs the tests' commands name: the hook leaves alone a command whose program is not on PATH
# (an alias, a function, a typo: hooks/shell.py), so these stand-ins put them there on any machine.
PROGRAMS = ("pytest", "rg", "cargo", "npm", "make", "pip", "git", "grep", "cat", "nl", "find", "ruff", "tox", "uv",
            "python", "sed", "tail", "head", "curl")


@pytest.fixture(autouse=True)
def programs_on_path(tmp_path_factory, monkeypatch):
    stubs = tmp_path_factory.getbasetemp() / "stub-bin"
    if not stubs.is_dir():
        stubs.mkdir()
        for name in PROGRAMS:
            (stubs / name).write_text("#!/bin/sh\nexit 0\n")
            (stubs / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{os.environ.get('PATH', '')}:{stubs}")  # real programs first


@pytest.fixture(autouse=True)
def no_user_rules(tmp_path, monkeypatch):
    """In-process rewrites read Claude Code's permission rules (permissions.py): none from the real HOME."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)


def payload(command, description="Run the unit tests", transcript=None, **tool_input) -> dict:
    return {"session_id": "abc123", "transcript_path": transcript, "cwd": "/repo", "permission_mode": "default",
            "hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": {"command": command, "description": description, "timeout": 120000, **tool_input},
            "tool_use_id": "toolu_01ABC123"}


def inner_command(wrapped: str) -> tuple[str, str]:
    """(query, original command) back out of `... run QUERY -- bash -c CMD`."""
    words = shlex.split(wrapped)
    run = words.index("run")
    assert words[run + 2:run + 5][:3] == ["--", "bash", "-c"] and len(words) == run + 6, words
    return words[run + 1], words[run + 5]


@pytest.mark.parametrize(("command", "family"), [
    ("pytest -q tests/unit", "test"), ("python -m pytest -x", "test"), ("uv run pytest", "test"),
    ("FOO=1 npm test", "test"), ("cargo test 2>&1", "test"), ("make -j4", "build"), ("ruff check .", "lint"),
    ("grep -rn load_config .", "grep"), ("rg -n TODO 2>/dev/null", "grep"), ("git log -50", "git"),
    ("git diff HEAD~3", "git"), ("git blame a.py", "git"), ("pip install -e .", "install"),
    ("cat src/app.py", "read"), ("sed -n '/def main/,/^$/p' big.py", "read"), ("tail -n +200 log.txt", "read"),
    ("sed -n 1,400p a.py && cat b.py", "read"), ("head -50 a.log && pytest -q", "test"),
    ("git log -5", "git"), ("git show HEAD", "git"), ("git show --stat -p HEAD", "git"),
    ("git log --oneline", "git"), ("git diff --stat=80 -U5", "git"),
    ("ls && pytest -q", "test"), ("sudo -E make install", "build"),
])
def test_long_output_commands_are_wrapped(command, family):
    assert should_wrap(command) == family


@pytest.mark.parametrize("command", [
    "ls -la", "echo hi", "git status", "git commit -m x",  # short outputs: not in any family
    "pytest -q | tail -20", "grep -rn x . > hits.txt", "make >> build.log 2>&1", "pytest &", "(cd a && pytest)",
    "cd sub && pytest", "export X=1; pytest", "vim a.py", "less log.txt", "python", "python3 -i", "top",
    "tail -f app.log", "ssh host pytest", "git add -p", "docker run -it img pytest",
    "squeez run 'q' -- pytest", "/opt/bin/squeez run q -- make", 'echo "open quote', "pytest -q\nmake",
    "git log `cat ref`", "",
])
def test_commands_left_alone(command):
    assert should_wrap(command) is None


@pytest.mark.parametrize("command", [
    "head -50 app.log", "head -n 300 log.txt", "head -c 4096 blob", "tail -n 100 app.log", "tail -20 a.log",
    "tail --lines=40 a.log", "sed -n 1,400p big.py", "sed -n '120,180p' src/app.py", "sed -n 42p a.py",
    "wc -l src/*.py", "git show --stat HEAD", "git show --name-only HEAD~2", "git diff --stat main",
    "git diff --name-status HEAD~3", "git log --oneline -20", "git log --oneline -n 5", "git log --stat -3 --oneline",
    "git log --max-count=10 --oneline", "git blame -L 10,40 a.py", "head -50 a.log && tail -n 20 b.log",
    "cd pkg && sed -n 1,80p mod.py", "FOO=1 head -n 10 a",
])
def test_bounded_reads_are_left_alone(command):
    """The agent already chose the window (issue 37 item 2): pruning it again only loses lines."""
    assert should_wrap(split_cd_prefix(command)[1]) is None
    assert rewrite(payload(command), "claude-code", settings_mod.Settings()) is None


def test_claude_code_reply_wraps_the_command_and_keeps_the_rest_of_tool_input(tmp_path):
    transcript = tmp_path / "session.jsonl"
    transcript.write_text("\n".join(json.dumps(e) for e in [
        {"type": "user", "message": {"role": "user", "content": "The login test is flaky, find out why"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "Looking."}]}},
        {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                                                   "content": "output"}]}},
    ]) + "\n")
    reply = rewrite(payload("pytest -q tests/test_login.py", transcript=str(transcript)), "claude-code",
                    settings_mod.Settings())
    output = reply["hookSpecificOutput"]
    assert set(output) == {"hookEventName", "updatedInput"}  # no permissionDecision: prompts are unchanged
    assert output["hookEventName"] == "PreToolUse"
    updated = output["updatedInput"]
    assert {k: v for k, v in updated.items() if k != "command"} == {"description": "Run the unit tests",
                                                                   "timeout": 120000}
    query, original = inner_command(updated["command"])
    assert original == "pytest -q tests/test_login.py"
    assert query == "Run the unit tests (task: The login test is flaky, find out why)"


def test_quoting_survives_a_command_full_of_quotes():
    command = """grep -rn "it's a \\"test\\"" . --include='*.py' 2>&1"""
    updated = rewrite(payload(command, description="Find 'quoted' $HOME `x`"), "claude-code",
                      settings_mod.Settings())["hookSpecificOutput"]["updatedInput"]
    assert inner_command(updated["command"]) == ("Find 'quoted' $HOME `x`", command)


def test_a_leading_cd_stays_in_the_agents_shell_and_the_rest_is_wrapped(env, tmp_path):  # noqa: F811
    """`cd pkg && CMD` is what agents write most: the cd runs unwrapped (its effect persists, as it would
    have), CMD runs under squeez run in that directory with its own exit code."""
    updated = rewrite(payload("cd pkg && grep -rn needle .", description="Find the needle"), "claude-code",
                      settings_mod.Settings())["hookSpecificOutput"]["updatedInput"]
    assert updated["command"].startswith("cd pkg && ") and " -- bash -c 'grep -rn needle .'" in updated["command"]
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.txt").write_text("hay\nneedle here\n")
    out = subprocess.run(["bash", "-c", updated["command"]], capture_output=True, cwd=tmp_path, env=env)
    assert out.returncode == 0 and b"./a.txt:2:needle here" in out.stdout
    for left_alone in ("cd $HOME && pytest", "cd a; pytest", "cd a && vim x", "cd a && cd b && pytest"):
        assert rewrite(payload(left_alone), "claude-code", settings_mod.Settings()) is None


def test_a_description_that_looks_like_an_option_still_runs_the_command(env, tmp_path):  # noqa: F811
    updated = rewrite(payload("grep -rn TODO .", description="--verbose search"), "claude-code",
                      settings_mod.Settings())["hookSpecificOutput"]["updatedInput"]
    out = subprocess.run(["bash", "-c", updated["command"]], capture_output=True, cwd=tmp_path, env=env)
    assert out.returncode == 1 and b"usage" not in out.stderr  # grep's own "nothing found", not ours


def test_codex_reply_allows_only_what_codex_runs_without_asking(tmp_path, monkeypatch):
    """More cases in test_hook_permissions.py: Codex needs "allow" to apply a rewrite, so only its own
    known-safe reads and searches are rewritten; tests, builds, git and installers keep its approval."""
    monkeypatch.setenv("CODEX_HOME", str(tmp_path))
    codex = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "grep -rn x ."}}
    output = rewrite(codex, "codex", settings_mod.Settings())["hookSpecificOutput"]
    assert output["permissionDecision"] == "allow" and set(output) == {"hookEventName", "permissionDecision",
                                                                      "updatedInput"}
    assert inner_command(output["updatedInput"]["command"])[1] == "grep -rn x ."
    argv = {**codex, "tool_input": {"command": ["bash", "-lc", "rg -n TODO src"]}}
    shell, flag, wrapped = rewrite(argv, "codex", settings_mod.Settings())["hookSpecificOutput"]["updatedInput"][
        "command"]
    assert (shell, flag) == ("bash", "-lc") and inner_command(wrapped)[1] == "rg -n TODO src"
    for command in ("pip install requests", "cargo test", "git log -20", "pytest -q"):
        call = {**codex, "tool_input": {"command": command}}
        assert rewrite(call, "codex", settings_mod.Settings()) is None
        assert rewrite(call, "claude-code", settings_mod.Settings()) is not None


def test_patterns_come_from_the_config_file(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("hook_patterns:\n  test: ['./run_tests\\b']\n  read: []\n")
    settings = settings_mod.resolve({}, env={}, config_path=str(config))
    (tmp_path / "run_tests").write_text("#!/bin/sh\n")
    (tmp_path / "run_tests").chmod(0o755)
    assert rewrite({**payload("./run_tests --all"), "cwd": str(tmp_path)}, "claude-code", settings) is not None
    assert rewrite(payload("pytest -q"), "claude-code", settings) is None  # the family's defaults replaced
    assert rewrite(payload("cat a.py"), "claude-code", settings) is None  # family turned off
    config.write_text("hook_patterns:\n  test: ['(unclosed']\n")
    with pytest.raises(ConfigError, match=r"hook_patterns.test: '\(unclosed' is not a regular expression"):
        settings_mod.resolve({}, env={}, config_path=str(config))


def test_last_user_prompt_reads_claude_and_codex_transcripts(tmp_path):
    codex = tmp_path / "rollout.jsonl"
    codex.write_text("\n".join(json.dumps(e) for e in [
        {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "<environment_context>cwd</environment_context>"}]}},
        {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "make the build pass"}]}},
        "not an object", {"type": "response_item", "payload": {"type": "function_call"}}]) + "\n{truncated")
    assert last_user_prompt(str(codex)) == "make the build pass"
    assert last_user_prompt(str(tmp_path / "missing.jsonl")) is None


MALFORMED = [b"", b"not json", b"[]", b"null", b'{"tool_name": "Bash"}', b'{"tool_name": "Bash", "tool_input": 3}',
             b'{"tool_name": "Bash", "tool_input": {"command": 42}}', b'{"tool_name": "Read", "tool_input": {}}',
             b'{"tool_name": "Bash", "tool_input": {"command": "pytest"}, "transcript_path": 7}' + b"x" * 10,
             b"\xff\xfe\x00garbage", json.dumps(payload("pytest", transcript="/nonexistent/t.jsonl",
                                                        run_in_background=True)).encode()]


@pytest.mark.parametrize("data", MALFORMED)
@pytest.mark.parametrize("host", ["claude-code", "codex"])
def test_malformed_payloads_get_no_reply_and_exit_0(data, host):
    stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")  # as sys.stdin decodes it
    stdout = io.StringIO()
    assert hook_main(host, stdin, stdout) == 0 and stdout.getvalue() == ""


def test_the_entry_point_stays_silent_on_garbage(env):  # noqa: F811
    for data in (b"\xff\xfe\x00garbage", b'{"tool_name": "Bash", "tool_input": {"command": 42}}'):
        out = subprocess.run([str(SQUEEZ), "hook", "claude-code"], input=data, capture_output=True, env=env,
                             timeout=60)
        assert (out.returncode, out.stdout, out.stderr) == (0, b"", b"")


def test_a_broken_config_never_blocks_the_call(env, tmp_path):  # noqa: F811
    config = tmp_path / "bad.yaml"
    config.write_text("hook_patterns: [oops\n")
    out = subprocess.run([str(SQUEEZ), "hook", "claude-code"], input=json.dumps(payload("pytest")).encode(),
                         capture_output=True, env={**env, "SQUEEZ_CONFIG": str(config)}, timeout=60)
    assert (out.returncode, out.stdout) == (0, b"")


def test_install_merges_is_idempotent_and_uninstall_removes_only_ours(tmp_path):
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    theirs = {"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "prettier --write"}]}
    path.write_text(json.dumps({"model": "opus", "hooks": {"PreToolUse": [theirs], "Stop": [{"hooks": []}]}}))
    assert install(path, "claude-code") is True
    once = path.read_bytes()
    assert install(path, "claude-code") is False and path.read_bytes() == once
    data = json.loads(once)
    assert data["model"] == "opus" and data["hooks"]["Stop"] == [{"hooks": []}]
    assert data["hooks"]["PreToolUse"][0] == theirs
    ours = data["hooks"]["PreToolUse"][1]
    assert ours["matcher"] == "Bash" and ours["hooks"][0]["command"].endswith(" hook claude-code")
    assert install(path, "codex") is True  # another host's hook is another entry
    assert uninstall(path, "claude-code") is True and uninstall(path, "claude-code") is False
    left = json.loads(path.read_text())["hooks"]["PreToolUse"]
    assert left[0] == theirs and len(left) == 2 and left[1]["hooks"][0]["command"].endswith(" hook codex")


def test_install_refuses_a_file_it_cannot_read_and_changes_nothing(env, tmp_path):  # noqa: F811
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{not json")
    out = subprocess.run([str(SQUEEZ), "install", "claude-code", "--project", "--dir", str(tmp_path)],
                         capture_output=True, env=env)
    assert out.returncode == 2 and b"is not valid JSON" in out.stderr and settings.read_text() == "{not json"
    out = subprocess.run([str(SQUEEZ), "install", "codex", "--user"], capture_output=True, env=env)
    assert out.returncode == 0 and (Path(env["HOME"]) / ".codex" / "hooks.json").is_file()
    assert b"keep Codex's approval" in out.stderr


def test_hook_answers_without_importing_a_backend(env):  # noqa: F811
    code = ("import sys, io, json; sys.stdin = io.StringIO(json.dumps({'tool_name': 'Bash', 'tool_input': "
            "{'command': 'pytest'}})); from squeez_ray.cli import main; main(['hook', 'claude-code']); "
            "assert not any(m in sys.modules for m in ('onnxruntime', 'torch', 'numpy', 'tokenizers')), "
            "sorted(m for m in sys.modules if m in ('onnxruntime', 'torch', 'numpy', 'tokenizers'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env)
    assert out.returncode == 0, out.stderr


def test_install_writes_through_a_symlinked_settings_file_and_keeps_the_link(tmp_path):
    """Dotfiles managers link ~/.claude/settings.json to a tracked file (issue 37 item 6)."""
    dotfiles = tmp_path / "dotfiles" / "claude"
    dotfiles.mkdir(parents=True)
    real = dotfiles / "settings.json"
    real.write_text(json.dumps({"model": "opus"}))
    real.chmod(0o600)
    link = tmp_path / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(os.path.relpath(real, link.parent))
    assert install(link, "claude-code") is True
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert json.loads(real.read_text())["model"] == "opus" and "hooks" in json.loads(real.read_text())
    assert (real.stat().st_mode & 0o777) == 0o600
    assert sorted(p.name for p in dotfiles.iterdir()) == ["settings.json"]  # no temporary file left
    assert uninstall(link, "claude-code") is True
    assert link.is_symlink() and json.loads(real.read_text()) == {"model": "opus"}
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "dotfiles" / "new.json")
    assert install(dangling, "codex") is True
    assert dangling.is_symlink() and (tmp_path / "dotfiles" / "new.json").is_file()


@pytest.mark.parametrize("verb", ["install", "uninstall"])
def test_a_settings_file_nested_too_deeply_gets_one_line(env, tmp_path, verb):  # noqa: F811
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    deep = "[" * 100_000 + "]" * 100_000
    settings.write_text(deep)
    out = subprocess.run([str(SQUEEZ), verb, "claude-code", "--project", "--dir", str(tmp_path)],
                         capture_output=True, env=env, timeout=60)
    assert out.returncode == 2 and b"Traceback" not in out.stderr and len(out.stderr.splitlines()) == 1, out.stderr
    assert b"nested too deeply" in out.stderr and settings.read_text() == deep


def test_a_command_whose_rewrite_would_not_fit_in_one_argument_is_left_alone(tmp_path):
    """Linux caps one argument at 128 KiB (MAX_ARG_STRLEN): a 60 KB grep full of quotes runs as given,
    but its rewrite (each ' becomes '"'"') is ~180 KB and `bash -c` would not even start: no output at all."""
    command = "grep -n " + " ".join(["-e 'x'"] * 12_000) + " a.txt"
    (tmp_path / "a.txt").write_text("x\n")
    assert subprocess.run(["bash", "-c", command], capture_output=True, cwd=tmp_path).returncode == 0
    for host in ("claude-code", "codex"):
        assert rewrite({**payload(command), "cwd": str(tmp_path)}, host, settings_mod.Settings()) is None, host
    assert rewrite(payload("grep -n " + " ".join(["x"] * 2_000) + " a.txt"), "claude-code", settings_mod.Settings())
