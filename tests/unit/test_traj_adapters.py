"""Trajectory adapters over the real stored runs in ../shared/trajectories (no Ray, no engine)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from squeez_ray.trajectories import (
    claude_code,
    codex,
    mini_swe_agent,
    openhands,
    swe_agent,
)
from squeez_ray.trajectories.detect import ADAPTERS, detect_format, discover_units
from squeez_ray.trajectories.verify import check_file

# unit -> (format, observations); counts from TRAJECTORY_FORMATS.md (mini v1: 23 messages, one of
# them rendered as <output_head> + <output_tail>, so 24 observations).
EXPECTED = {
    "swe-agent/pydicom__pydicom-1458.traj": ("swe-agent", 12),
    "swe-agent/6e44b9__sweagenttestrepo-1c2844.traj": ("swe-agent", 5),
    "swe-agent/marshmallow-code__marshmallow-1867.function_calling_replace_from_source.traj": ("swe-agent", 13),
    "openhands/multi_swe_bench.examples.output.jsonl": ("openhands", 103),
    "openhands/basic_gui_mode.json": ("openhands", 4),
    "openhands/wrong_initial_state.json": ("openhands", 3),
    "openhands-v1-sdk/cd94562403b9487ebdd4018e3f531dfd": ("openhands-v1", 2),
    "claude-code/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl": ("claude-code", 167),
    "claude-code/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl": ("claude-code", 21),
    "claude-code/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl": ("claude-code", 12),
    "mini-swe-agent/astropy__astropy-12907.v2.2.7.pr814.traj.json": ("mini-swe-agent", 35),
    "mini-swe-agent/astropy__astropy-12907.v2.3.0.pr854.traj.json": ("mini-swe-agent", 63),
    "mini-swe-agent/django__django-15104.v1.15.0.traj.json": ("mini-swe-agent", 24),
    "codex-cli/example.legacy-rollout.jsonl": ("codex", 246),
}


def _load(root: Path, unit: str):
    adapter = ADAPTERS[EXPECTED[unit][0]]
    doc = adapter.load(root / unit)
    return adapter, doc, adapter.iter_observations(doc)


def test_units_and_formats_are_found_from_content(trajectories_dir, tmp_path):
    units = discover_units(trajectories_dir)
    runs = {u: detect_format(trajectories_dir / u) for u in units if detect_format(trajectories_dir / u)}
    assert {u: f for u, f in runs.items()} == {u: f for u, (f, _) in EXPECTED.items()}
    # The name says nothing: a run renamed to something meaningless is still recognised.
    for unit, (fmt, _) in EXPECTED.items():
        if (trajectories_dir / unit).is_file():
            renamed = tmp_path / f"{fmt}.renamed.dat"
            shutil.copyfile(trajectories_dir / unit, renamed)
            assert detect_format(renamed) == fmt


@pytest.mark.parametrize("unit", sorted(EXPECTED))
def test_observation_counts_match_the_format_notes(trajectories_dir, unit):
    _, _, observations = _load(trajectories_dir, unit)
    assert len(observations) == EXPECTED[unit][1]
    assert all(obs.task for obs in observations if EXPECTED[unit][0] != "openhands-v1") or unit.startswith("codex")


@pytest.mark.parametrize("unit", sorted(EXPECTED))
def test_rewriting_every_observation_with_itself_is_byte_identical(trajectories_dir, unit):
    """The serializer, not a shortcut: every observation is set (so every copy and line is re-encoded)."""
    adapter, doc, observations = _load(trajectories_dir, unit)
    for obs in observations:
        adapter.set_observation(doc, obs, obs.text)
    dumped = adapter.dump(doc)
    if isinstance(dumped, dict):
        assert dumped and all((trajectories_dir / unit / name).read_bytes() == data for name, data in dumped.items())
    else:
        assert dumped == (trajectories_dir / unit).read_bytes()


def _reload(adapter, tmp_path: Path, unit: str, data: bytes):
    path = tmp_path / Path(unit).name
    path.write_bytes(data)
    doc = adapter.load(path)
    return doc, adapter.iter_observations(doc)


@pytest.mark.parametrize("unit", [u for u, (f, _) in EXPECTED.items() if f == "swe-agent"])
def test_swe_agent_changes_every_copy_together(trajectories_dir, tmp_path, unit):
    adapter, doc, observations = _load(trajectories_dir, unit)
    original = json.loads((trajectories_dir / unit).read_text())
    changed = [obs for obs in observations if obs.skip_reason is None]
    assert changed
    for obs in changed:
        adapter.set_observation(doc, obs, f"PRUNED-{obs.index}")
    data = adapter.dump(doc)
    assert check_file("swe-agent", (trajectories_dir / unit).read_bytes(), data) == []
    new = json.loads(data)
    for obs in changed:
        step, j = obs.locator
        assert new["trajectory"][step]["observation"] == f"PRUNED-{obs.index}"
        if j is not None:  # the history copy keeps the template suffix after the new text
            suffix = original["history"][j]["content"][len(obs.text):]
            assert new["history"][j]["content"] == f"PRUNED-{obs.index}" + suffix
    # Each step's message list repeats the history by position. A verbatim copy must follow the new
    # history; a copy a history processor rewrote ("Old environment output: (7 lines omitted)") is
    # not a copy of the text and stays as it was.
    followed = 0
    for k, step in enumerate(new["trajectory"]):
        for key in ("messages", "query"):
            for j, message in enumerate(step.get(key) or []):
                before = original["trajectory"][k][key][j]
                if before == original["history"][j]:
                    assert message == new["history"][j]
                    followed += message != before
                else:
                    assert message == before
    assert followed > 0 or not any(step.get("messages") for step in original["trajectory"])
    assert (trajectories_dir / unit).read_bytes() != data


def test_swe_agent_leaves_an_observation_whose_history_copy_is_a_template(trajectories_dir):
    _, _, observations = _load(trajectories_dir, "swe-agent/marshmallow-code__marshmallow-1867."
                                                  "function_calling_replace_from_source.traj")
    assert [o.skip_reason for o in observations if o.text == ""] == ["empty output"]


def test_mini_swe_agent_keeps_tags_and_changes_raw_output(trajectories_dir, tmp_path):
    unit = "mini-swe-agent/astropy__astropy-12907.v2.2.7.pr814.traj.json"
    adapter, doc, observations = _load(trajectories_dir, unit)
    obs = max(observations, key=lambda o: len(o.text))
    adapter.set_observation(doc, obs, "kept line\n")
    new, _ = _reload(adapter, tmp_path, unit, mini_swe_agent.dump(doc))
    message = new.data["messages"][obs.locator[0]]
    assert message["content"] == "<returncode>0</returncode>\n<output>\nkept line\n</output>"
    assert message["extra"]["raw_output"] == "kept line\n"
    # v1 head/tail form: each part is its own observation, and the wrapper between them stays.
    _, doc1, obs1 = _load(trajectories_dir, "mini-swe-agent/django__django-15104.v1.15.0.traj.json")
    parts = [o for o in obs1 if o.locator[1] in ("head", "tail")]
    assert [o.locator[1] for o in parts] == ["head", "tail"]
    for part in parts:
        mini_swe_agent.set_observation(doc1, part, part.locator[1].upper())
    content = doc1.data["messages"][parts[0].locator[0]]["content"]
    assert "<output_head>\nHEAD\n</output_head>\n<elided_chars>" in content and content.endswith(
        "<output_tail>\nTAIL\n</output_tail>")


def test_openhands_keeps_the_cat_n_header(trajectories_dir):
    _, doc, observations = _load(trajectories_dir, "openhands/multi_swe_bench.examples.output.jsonl")
    read = max(observations, key=lambda o: len(o.text))
    openhands.set_observation(doc, read, "     1\tint main(void)")
    row, k = read.locator
    content = doc.objs[row]["history"][k]["content"]
    assert content.startswith("Here's the result of running `cat -n` on ") and content.endswith(
        ":\n     1\tint main(void)")
    assert read.thought and read.args and read.task and read.tool


def test_claude_code_keeps_system_reminder_and_updates_bash_stdout(trajectories_dir):
    _, doc, observations = _load(trajectories_dir, "claude-code/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl")
    with_reminder = next(o for o in observations if "<system-reminder>" in str(
        doc.objs[o.locator[0]]["message"]["content"][o.locator[1]]["content"]))
    assert "<system-reminder>" not in with_reminder.text
    claude_code.set_observation(doc, with_reminder, "x")
    block = doc.objs[with_reminder.locator[0]]["message"]["content"][with_reminder.locator[1]]
    assert block["content"].startswith("x\n\n<system-reminder>") and block["content"].endswith("</system-reminder>\n")
    bash = next(o for o in observations if o.tool == "Bash" and doc.objs[o.locator[0]]["toolUseResult"].get(
        "stdout") == o.text and len(o.text) > 100)
    claude_code.set_observation(doc, bash, "short")
    assert doc.objs[bash.locator[0]]["toolUseResult"]["stdout"] == "short"
    assert doc.objs[bash.locator[0]]["uuid"]  # the chain is never touched
    assert set(doc.changed) == {with_reminder.locator[0], bash.locator[0]}


def test_codex_prunes_inside_the_json_envelope_and_keeps_crlf(trajectories_dir):
    unit = "codex-cli/example.legacy-rollout.jsonl"
    _, doc, observations = _load(trajectories_dir, unit)
    shell = next(o for o in observations if o.locator[1] == "shell" and "\n" in o.text)
    mcp = next(o for o in observations if o.locator[1] == "blocks")
    assert shell.args and not shell.args.startswith("{")  # the shell command, not its JSON
    codex.set_observation(doc, shell, "one line ✓")
    codex.set_observation(doc, mcp, "two")
    data = codex.dump(doc)
    original = (trajectories_dir / unit).read_bytes()
    assert data.count(b"\r\n") == original.count(b"\r\n") and check_file("codex", original, data) == []
    line = data.split(b"\r\n")[shell.locator[0]].decode()
    envelope = json.loads(json.loads(line)["output"])
    assert envelope["output"] == "one line ✓" and "metadata" in envelope
    assert "✓" in line  # ensure_ascii=False, as the format writes it
    changed = [i for i, (a, b) in enumerate(zip(original.split(b"\r\n"), data.split(b"\r\n"))) if a != b]
    assert changed == sorted({shell.locator[0], mcp.locator[0]})


def test_queries_come_from_the_next_thought_then_the_call_then_the_task(trajectories_dir):
    from squeez_ray.trajectories.process import build_query

    _, _, observations = _load(trajectories_dir, "swe-agent/pydicom__pydicom-1458.traj")
    first, second = observations[0], observations[1]
    assert build_query(first, "thought", None, 2000) == second.thought.strip()
    assert build_query(first, "action", None, 2000) == second.args.strip()
    assert build_query(first, "task", None, 50) == first.task.strip()[:50]
    assert build_query(first, "fixed", "the traceback", 2000) == "the traceback"
    last = observations[-1]  # nothing follows: fall back to its own thought
    assert build_query(last, "thought", None, 2000) == last.thought.strip()


def test_verify_rejects_changes_outside_observations(trajectories_dir):
    original = (trajectories_dir / "swe-agent/6e44b9__sweagenttestrepo-1c2844.traj").read_bytes()
    data = json.loads(original)
    data["info"]["submission"] = "changed"
    data["trajectory"][0]["observation"] = "fine"
    problems = check_file("swe-agent", original, json.dumps(data, indent=2).encode())
    assert len(problems) == 1 and ".info.submission" in problems[0]


def test_codex_current_envelope_is_read_and_written_back(tmp_path):
    """No real current-format rollout with tool calls exists (TRAJECTORY_FORMATS.md, gaps); this one
    follows the documented envelope: response_item payloads, and an exec_command_end UI copy."""
    output = "\n".join(f"line {i}" for i in range(30))
    records = [
        {"timestamp": "t0", "type": "session_meta", "payload": {"id": "s", "cwd": "/w"}},
        {"timestamp": "t1", "type": "response_item", "payload": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the failing test"}]}},
        {"timestamp": "t2", "type": "response_item", "payload": {
            "type": "reasoning", "summary": [{"type": "summary_text", "text": "run the tests"}]}},
        {"timestamp": "t3", "type": "response_item", "payload": {
            "type": "function_call", "name": "shell", "call_id": "c1",
            "arguments": json.dumps({"command": ["bash", "-lc", "pytest -q"]})}},
        {"timestamp": "t4", "type": "event_msg", "payload": {"type": "exec_command_end", "call_id": "c1",
                                                              "aggregated_output": output}},
        {"timestamp": "t5", "type": "response_item", "payload": {
            "type": "function_call_output", "call_id": "c1",
            "output": json.dumps({"output": output, "metadata": {"exit_code": 1}}, separators=(",", ":"))}},
    ]
    path = tmp_path / "rollout-2025-10-01.jsonl"
    path.write_text("".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in records))
    assert detect_format(path) == "codex"
    doc = codex.load(path)
    [obs] = codex.iter_observations(doc)
    assert (obs.text, obs.tool, obs.args, obs.thought, obs.task) == (
        output, "shell", "pytest -q", "run the tests", "fix the failing test")
    codex.set_observation(doc, obs, "line 7")
    data = codex.dump(doc)
    assert check_file("codex", path.read_bytes(), data) == []
    lines = data.decode().split("\n")
    assert json.loads(json.loads(lines[5])["payload"]["output"])["output"] == "line 7"
    assert lines[:5] == path.read_text().split("\n")[:5]  # the UI log stays as it was


def test_swe_agent_query_copies_in_text_blocks_follow_too(trajectories_dir, tmp_path):
    """SWE-agent >= 1.1 keeps each step's LM input in ``query``; a cache-control processor stores
    the same text as a block. Built from the real 1.x sample by adding such a copy."""
    data = json.loads((trajectories_dir / "swe-agent/6e44b9__sweagenttestrepo-1c2844.traj").read_text())
    history = data["history"]
    data["trajectory"][2]["query"] = [
        {**m, "content": [{"type": "text", "text": m["content"], "cache_control": {"type": "ephemeral"}}]}
        for m in history[:6]]
    path = tmp_path / "with-query.traj"
    path.write_text(json.dumps(data, indent=2))
    doc = swe_agent.load(path)
    first = swe_agent.iter_observations(doc)[0]
    swe_agent.set_observation(doc, first, "PRUNED")
    new = json.loads(swe_agent.dump(doc))
    j = first.locator[1]
    block = new["trajectory"][2]["query"][j]["content"][0]
    assert block["text"] == new["history"][j]["content"] and block["text"].startswith("PRUNED\n(Open file")
    assert block["cache_control"] == {"type": "ephemeral"}
    assert check_file("swe-agent", path.read_bytes(), swe_agent.dump(doc)) == []


def test_openhands_v1_benchmark_rows_embed_v1_events(trajectories_dir, tmp_path):
    """A V1 benchmark output.jsonl row holds the V1 event dicts in ``history``; built here from the
    real V1 conversation's events plus a longer terminal output."""
    conversation = trajectories_dir / "openhands-v1-sdk/cd94562403b9487ebdd4018e3f531dfd"
    events = [json.loads(p.read_text()) for p in sorted((conversation / "events").glob("*.json"))]
    observation = next(e for e in events if e["kind"] == "ObservationEvent" and e["tool_name"] == "terminal")
    observation["observation"]["content"][0]["text"] = "\n".join(f"/workspace/file{i}.py" for i in range(12))
    row = {"instance_id": "demo-1", "instruction": "list the python files", "history": events, "metrics": {}}
    path = tmp_path / "output.jsonl"
    path.write_text(json.dumps(row, separators=(",", ":"), ensure_ascii=False) + "\n")
    assert detect_format(path) == "openhands"
    doc = openhands.load(path)
    observations = openhands.iter_observations(doc)
    assert len(observations) == 2 and observations[0].task == "list the python files"
    terminal = observations[0]
    assert terminal.tool == "terminal" and "pwd" in terminal.args
    openhands.set_observation(doc, terminal, "/workspace/file3.py")
    data = openhands.dump(doc)
    assert check_file("openhands", path.read_bytes(), data) == []
    written = json.loads(data)["history"][terminal.locator[1]]
    assert written["observation"]["content"][0]["text"] == "/workspace/file3.py"
