"""Commands that need the agent's own shell are left alone (issue 37 item 4): the rewrite runs a fresh
``bash -c``, where the agent's aliases and functions (Claude Code's shell snapshot) do not exist."""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest
from test_agent_hooks import payload, programs_on_path  # noqa: F401 - an autouse fixture
from test_cli_prune import env  # noqa: F401 - env is a fixture

from squeez_ray.cli import settings as settings_mod
from squeez_ray.cli.hooks.claude_code import rewrite
from squeez_ray.cli.hooks.shell import snapshot_names

# The shape `claude` writes: `declare -f` functions, `alias` lines, shopt and PATH.
SNAPSHOT = """# Snapshot file
unalias -a 2>/dev/null || true
shopt -s expand_aliases
make () 
{ 
    command make -j8 "$@"
}
function deploy {
    ./scripts/deploy.sh
}
alias grep='grep --color=auto'
alias ls='ls --color=auto'
alias pytest='python -m pytest -p no:cacheprovider'
alias -- rg="rg --smart-case"
export PATH=/usr/local/bin:/usr/bin:/bin
"""


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".claude" / "shell-snapshots").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    return home


def wrapped(command, cwd="/repo") -> bool:
    return rewrite({**payload(command), "cwd": str(cwd)}, "claude-code", settings_mod.Settings()) is not None


def test_aliases_and_functions_in_the_shell_snapshot_are_left_alone(home):
    (home / ".claude" / "shell-snapshots" / "snapshot-bash-1764240000000-abc123.sh").write_text(SNAPSHOT)
    assert snapshot_names() >= {"make", "deploy", "pytest", "rg"} and "grep" not in snapshot_names()
    for command in ("pytest -q", "make -j4", "FOO=1 pytest -x", "cat a.py && make", "rg -n TODO .", "cd a && make"):
        assert not wrapped(command), command
    for command in ("grep -rn x .", "cargo test", "python -m pytest -q", "npm test"):
        assert wrapped(command), command  # a colour-only alias runs the same program the same way


def test_a_program_that_is_not_on_path_is_left_alone(home, monkeypatch, tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert not wrapped("pytest -q") and not wrapped("grep -rn x .")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "pytest").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "pytest").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert wrapped("pytest -q")
    assert wrapped("echo start && pytest -q")  # a builtin needs no PATH


def test_a_path_must_name_an_executable_file(home, tmp_path):
    settings = settings_mod.Settings(hook_patterns={"test": [r"\./run_tests\b", r"/\S+/pytest\b"]})

    def wrapped_here(command):
        return rewrite({**payload(command), "cwd": str(tmp_path)}, "claude-code", settings) is not None

    assert not wrapped_here("./run_tests --all") and not wrapped_here("/opt/nowhere/pytest -q")
    (tmp_path / "run_tests").write_text("#!/bin/sh\n")
    assert not wrapped_here("./run_tests --all")  # not executable
    (tmp_path / "run_tests").chmod(0o755)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "pytest").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "pytest").chmod(0o755)
    assert wrapped_here("./run_tests --all") and wrapped_here(f"{tmp_path}/bin/pytest -q")


def test_the_alias_that_became_exit_127(env, home, tmp_path):  # noqa: F811
    """The audit's case, for real: the agent's shell has `alias pytest=...`; no program pytest exists.
    The rewritten command would fail with 127; the hook leaves it alone, so it runs as typed."""
    (home / ".claude" / "shell-snapshots" / "snapshot-bash-1.sh").write_text(
        "shopt -s expand_aliases\nalias pytest='echo tests ran'\n")
    rewritten = f"squeez run q -- bash -c {shlex.quote('pytest -q')}"
    out = subprocess.run(["bash", "-c", f"source {home}/.claude/shell-snapshots/snapshot-bash-1.sh\n"
                          f"bash -c {shlex.quote('pytest -q')}"], capture_output=True, env={**env, "PATH": "/bin"})
    assert out.returncode == 127, rewritten  # what the fresh bash -c inside the rewrite meets
    assert not wrapped("pytest -q")
    out = subprocess.run(["bash", "-c", f"source {home}/.claude/shell-snapshots/snapshot-bash-1.sh\npytest -q"],
                         capture_output=True, env={**env, "PATH": "/bin"})
    assert (out.returncode, out.stdout) == (0, b"tests ran -q\n")


def test_snapshots_are_read_safely(home):
    folder = home / ".claude" / "shell-snapshots"
    os.mkfifo(folder / "snapshot-bash-fifo.sh")  # never opened for a blocking read
    (folder / "snapshot-zsh-dir.sh").mkdir()
    (folder / "snapshot-bash-2.sh").write_bytes(b"\xff\xfe\x00\nalias pytest='x'\n" + b"# pad\n" * 10)
    assert "pytest" in snapshot_names()
