"""The raw escape hatch (issue 37 item 9): a call, or a whole session, the hooks leave alone."""

from __future__ import annotations

import json
import subprocess

import pytest
from test_agent_hooks import payload, programs_on_path  # noqa: F401 - an autouse fixture
from test_cli_prune import SQUEEZ, env  # noqa: F401 - env is a fixture

from squeez_ray.cli import settings as settings_mod
from squeez_ray.cli.hooks.claude_code import rewrite
from squeez_ray.cli.hooks.raw import session_switch


@pytest.fixture(autouse=True)
def private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.delenv("SQUEEZ_RAW", raising=False)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))


def answered(command, host="claude-code", session="abc123") -> bool:
    call = {**payload(command), "session_id": session}
    return rewrite(call, host, settings_mod.Settings()) is not None


@pytest.mark.parametrize("command", [
    "SQUEEZ_RAW=1 pytest -q", "FOO=2 SQUEEZ_RAW=1 pytest -q", "cd pkg && SQUEEZ_RAW=yes pytest -q",
    "pytest -q # squeez:raw", "pytest -q  #squeez: raw", "SQUEEZ_RAW='1' make", 'SQUEEZ_RAW="true" grep -rn x .',
])
def test_one_call_is_left_alone(command):
    assert not answered(command) and not answered(command, "codex")
    assert answered(command.replace("SQUEEZ_RAW", "OTHER_VAR").replace("squeez:", "note:"))


def test_the_agents_environment_turns_the_hooks_off_for_its_session(monkeypatch):
    monkeypatch.setenv("SQUEEZ_RAW", "1")
    assert not answered("pytest -q") and not answered("grep -rn x .", "codex")
    monkeypatch.setenv("SQUEEZ_RAW", "0")
    assert answered("pytest -q") and answered("grep -rn x .", "codex")


def test_a_call_can_switch_its_session_to_raw_and_back(tmp_path):
    assert answered("pytest -q")
    assert not answered("SQUEEZ_RAW=session pytest -q")
    assert session_switch("abc123").is_file() and str(tmp_path / "home" / ".local" / "state") in str(
        session_switch("abc123"))
    assert not answered("pytest -q") and not answered("make")  # the rest of the session runs raw
    assert answered("pytest -q", session="another-session")
    assert not answered("SQUEEZ_RAW=prune make")  # switches back; this call itself stays as typed
    assert not session_switch("abc123").exists() and answered("pytest -q")


@pytest.mark.parametrize("session", ["../../etc", "a/b", "", None, 7, "x" * 200, ".."])
def test_an_odd_session_id_records_nothing_anywhere(tmp_path, session):
    assert not answered("SQUEEZ_RAW=session pytest -q", session=session)
    assert answered("pytest -q", session=session)
    assert not list(tmp_path.rglob("raw-sessions/*"))


def test_through_the_entry_point(env):  # noqa: F811
    for command, replied in (("SQUEEZ_RAW=1 pytest -q", False), ("pytest -q # squeez:raw", False),
                             ("pytest -q", True)):
        data = json.dumps({**payload(command), "cwd": "/"}).encode()
        out = subprocess.run([str(SQUEEZ), "hook", "claude-code"], input=data, capture_output=True, env=env,
                             timeout=60)
        assert out.returncode == 0 and bool(out.stdout) == replied, (command, out.stdout)
    out = subprocess.run([str(SQUEEZ), "hook", "claude-code"], input=json.dumps(payload("pytest -q")).encode(),
                         capture_output=True, env={**env, "SQUEEZ_RAW": "1"}, timeout=60)
    assert (out.returncode, out.stdout) == (0, b"")
