"""Claude Code's built-in Read and Grep through the PostToolUse hook (issue 37 item 5): pruned in the tool's
own result shape, below the host's persistence limit, only on a host version known to apply it, else left alone.

The payloads are the recorded shapes in tests/fixtures/hooks/claude_code_posttooluse_{read,grep}.json (each
file's ``_source`` says where its shape comes from), with a longer text put in place of the recorded one.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path

import pytest
from test_cli_prune import SQUEEZ, env  # noqa: F401 - env is a fixture

from squeez_ray.cli import settings as settings_mod
from squeez_ray.cli.hooks.builtin_tools import LIMIT_CHARS, MIN_VERSION, post_tool_use
from squeez_ray.cli.hooks.install import install, uninstall

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hooks"
MARKER = re.compile(r"^\[squeez: .*omitted.*\]$")
TASK = "The invoice totals are off by one cent, please fix the rounding in round_total"


def recorded(tool: str) -> dict:
    data = json.loads((FIXTURES / f"claude_code_posttooluse_{tool}.json").read_text())
    data.pop("_source")
    return data


def transcript(tmp_path: Path, version: str | None = "2.1.240") -> str:
    path = tmp_path / "session.jsonl"
    stamp = {"version": version} if version else {}
    path.write_text("\n".join(json.dumps(entry) for entry in (
        {"type": "user", "message": {"role": "user", "content": TASK}, **stamp},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {}}]}, **stamp})) + "\n")
    return str(path)


@pytest.fixture
def settings(tmp_path):
    return settings_mod.resolve({"backend": "bm25", "daemon": False}, env={"HOME": str(tmp_path / "home"),
                                                          "SQUEEZ_STORE": str(tmp_path / "store")})


def source_file(n: int = 600) -> str:
    lines = []
    for i in range(1, n + 1):
        if i == 300:
            lines.append("def round_total(total):  # the invoice rounding")
        else:
            lines.append(f"    value_{i} = compute_{i % 17}(items, {i})  # bookkeeping step {i}")
    return "\n".join(lines) + "\n"


def read_payload(tmp_path, content: str, start_line: int = 1, version: str | None = "2.1.240") -> dict:
    payload = recorded("read")
    payload["transcript_path"] = transcript(tmp_path, version)
    n = content.count("\n") + (0 if content.endswith("\n") else 1)
    payload["tool_response"]["file"].update(content=content, numLines=n, startLine=start_line,
                                            totalLines=start_line - 1 + n)
    return payload


def grep_payload(tmp_path, n: int = 1500) -> dict:
    payload = recorded("grep")
    payload["transcript_path"] = transcript(tmp_path)
    lines = [f"src/billing/module_{i % 40}.py:{i}:    total = add_line_item(total, item_{i})" for i in range(n)]
    lines[700] = "src/billing/invoice.py:88:    return round_total(total)  # rounding of invoice totals"
    payload["tool_response"].update(content="\n".join(lines), numLines=n)
    return payload


def test_read_is_pruned_in_its_own_shape_and_every_line_keeps_its_number(tmp_path, settings):
    payload = read_payload(tmp_path, source_file())
    original = payload["tool_response"]
    reply = post_tool_use(copy.deepcopy(payload), settings)
    assert reply is not None and reply["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    updated = reply["hookSpecificOutput"]["updatedToolOutput"]
    assert updated.keys() == original.keys() and updated["file"].keys() == original["file"].keys()
    for key in ("type",):
        assert updated[key] == original[key]
    for key in ("filePath", "numLines", "startLine", "totalLines"):
        assert updated["file"][key] == original["file"][key]
    before, after = original["file"]["content"].split("\n"), updated["file"]["content"].split("\n")
    assert len(after) == len(before) and len(updated["file"]["content"]) < len(original["file"]["content"]) / 2
    markers = [i for i, line in enumerate(after) if MARKER.match(line)]
    assert markers and all(line in ("", before[i]) for i, line in enumerate(after) if i not in markers)
    assert "def round_total(total):  # the invoice rounding" in after  # where it was: line 300
    assert after.index("def round_total(total):  # the invoice rounding") == 299
    first = after[markers[0]]
    assert re.search(r"lines \d+-\d+ of this file omitted; squeez show \w+ --lines \d+-\d+ prints them", first)


def test_a_read_from_an_offset_names_the_files_own_line_numbers(tmp_path, settings):
    reply = post_tool_use(read_payload(tmp_path, source_file(), start_line=401), settings)
    content = reply["hookSpecificOutput"]["updatedToolOutput"]["file"]["content"]
    spans = [tuple(map(int, m.groups())) for m in re.finditer(r"lines (\d+)-(\d+) of this file omitted", content)]
    assert spans and all(start >= 401 for start, _ in spans)


def test_grep_is_pruned_below_the_hosts_persistence_limit(tmp_path, settings):
    payload = grep_payload(tmp_path)
    original = payload["tool_response"]
    assert len(original["content"]) > 20_000  # the host would keep it on disk behind a 2,000-character preview
    updated = post_tool_use(copy.deepcopy(payload), settings)["hookSpecificOutput"]["updatedToolOutput"]
    assert updated.keys() == original.keys()
    assert {k: v for k, v in updated.items() if k not in ("content", "numLines")} == \
        {k: v for k, v in original.items() if k not in ("content", "numLines")}
    assert len(updated["content"]) <= LIMIT_CHARS["Grep"] and updated["numLines"] == updated["content"].count("\n") + 1
    lines = updated["content"].split("\n")
    assert lines[-1].startswith("[squeez: kept ")
    kept = [line for line in lines[:-1] if not MARKER.match(line)]
    source = original["content"].split("\n")
    assert kept == [line for line in source if line in set(kept)]  # verbatim, in order
    assert "src/billing/invoice.py:88:    return round_total(total)  # rounding of invoice totals" in kept


@pytest.mark.parametrize("version", [None, "1.0.98", "2.1.121", "2.1.232", "two.one"])
def test_a_host_version_unknown_or_before_the_replacement_works_is_left_alone(tmp_path, settings, version):
    assert MIN_VERSION == (2, 1, 233)
    assert post_tool_use(read_payload(tmp_path, source_file(), version=version), settings) is None


def test_no_transcript_means_no_version_and_no_answer(tmp_path, settings):
    payload = read_payload(tmp_path, source_file())
    for path in (None, str(tmp_path / "missing.jsonl"), "/dev/zero"):
        assert post_tool_use({**payload, "transcript_path": path}, settings) is None


def test_the_recorded_payloads_as_they_are_are_too_small_to_touch(tmp_path, settings):
    for tool in ("read", "grep"):
        payload = {**recorded(tool), "transcript_path": transcript(tmp_path)}
        assert post_tool_use(payload, settings) is None


def shape_changes():
    def extra_key(p):
        p["tool_response"]["file"]["encoding"] = "utf-8"

    def image(p):
        p["tool_response"]["type"] = "image"

    def wrong_type(p):
        p["tool_response"]["file"]["numLines"] = "600"

    def string_response(p):
        p["tool_response"] = p["tool_response"]["file"]["content"]

    def pre_tool_use(p):
        p["hook_event_name"] = "PreToolUse"

    def another_tool(p):
        p["tool_name"] = "Glob"

    return [extra_key, image, wrong_type, string_response, pre_tool_use, another_tool]


@pytest.mark.parametrize("change", shape_changes(), ids=lambda f: f.__name__)
def test_an_unknown_read_shape_is_left_alone(tmp_path, settings, change):
    payload = read_payload(tmp_path, source_file())
    change(payload)
    assert post_tool_use(payload, settings) is None


@pytest.mark.parametrize("change", [{"mode": "files_with_matches"}, {"numFiles": None}, {"filenames": "a.py"},
                                   {"appliedLimit": "250"}, {"matches": []}], ids=str)
def test_an_unknown_grep_shape_or_mode_is_left_alone(tmp_path, settings, change):
    payload = grep_payload(tmp_path)
    payload["tool_response"].update(change)
    assert post_tool_use(payload, settings) is None


def test_raw_for_the_session_leaves_the_result_alone(tmp_path, settings):
    payload = read_payload(tmp_path, source_file())
    assert post_tool_use(payload, settings, environ={"SQUEEZ_RAW": "1"}) is None
    state = tmp_path / "state"
    (state / "squeez" / "raw-sessions").mkdir(parents=True)
    (state / "squeez" / "raw-sessions" / payload["session_id"]).touch()
    assert post_tool_use(payload, settings, environ={"XDG_STATE_HOME": str(state)}) is None
    assert post_tool_use(payload, settings, environ={"XDG_STATE_HOME": str(tmp_path / "none")}) is not None


@pytest.mark.parametrize("cli", [{"backend": "bm25", "min_lines": 100_000, "daemon": False}, {"backend": "none", "daemon": False}], ids=str)
def test_a_pruner_that_cuts_nothing_gets_no_answer(tmp_path, cli):
    """A gate of prune_output passed the text through, or the model kept every line: the result stays as it is."""
    passing = settings_mod.resolve(cli, env={"HOME": str(tmp_path / "home"), "SQUEEZ_STORE": str(tmp_path / "store")})
    assert post_tool_use(read_payload(tmp_path, source_file()), passing) is None


def test_the_hook_entry_point_answers_a_post_tool_use_payload_and_exits_0(env, tmp_path):  # noqa: F811
    payload = read_payload(tmp_path, source_file())
    run = {**env, "SQUEEZ_BACKEND": "bm25"}
    out = subprocess.run([str(SQUEEZ), "hook", "claude-code"], input=json.dumps(payload).encode(),
                         capture_output=True, env=run, timeout=120)
    assert out.returncode == 0, out.stderr
    reply = json.loads(out.stdout)
    assert reply["hookSpecificOutput"]["updatedToolOutput"]["file"]["numLines"] == 600
    codex = subprocess.run([str(SQUEEZ), "hook", "codex"], input=json.dumps(payload).encode(),
                           capture_output=True, env=run, timeout=120)
    assert (codex.returncode, codex.stdout) == (0, b"")  # Codex's PostToolUse cannot replace a result


def test_install_adds_the_read_grep_handler_idempotently_and_uninstall_removes_it(tmp_path):
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    theirs = {"matcher": "Write", "hooks": [{"type": "command", "command": "ruff format"}]}
    path.write_text(json.dumps({"hooks": {"PostToolUse": [theirs]}}))
    assert install(path, "claude-code") is True
    once = path.read_bytes()
    assert install(path, "claude-code") is False and path.read_bytes() == once
    post = json.loads(once)["hooks"]["PostToolUse"]
    assert post[0] == theirs and post[1]["matcher"] == "Read|Grep"
    assert post[1]["hooks"][0]["command"].endswith(" hook claude-code")
    codex = tmp_path / ".codex" / "hooks.json"
    assert install(codex, "codex") is True and "PostToolUse" not in json.loads(codex.read_text())["hooks"]
    assert uninstall(path, "claude-code") is True
    assert json.loads(path.read_text()) == {"hooks": {"PostToolUse": [theirs]}}
