"""`squeez report` replays the real stored runs in ../shared/trajectories through the hook's patterns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from squeez_ray.cli.hooks.patterns import DEFAULT_PATTERNS
from squeez_ray.cli.report import LEFT_ALONE, OTHER, description, shell_command
from squeez_ray.trajectories.detect import ADAPTERS, detect_format, discover_units

REPO = Path(__file__).resolve().parents[2]


def report(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUEEZ_")}
    env.update(HOME=str(tmp_path), PYTHONPATH=str(REPO), SQUEEZ_DAEMON="0")
    return subprocess.run([sys.executable, "-m", "squeez_ray.cli", "report", *args], check=False,
                          capture_output=True, text=True, env=env, timeout=300)


def test_shell_commands_are_read_from_each_formats_call():
    assert shell_command("Bash", '{"command": "pytest -q", "description": "Run the tests"}') == "pytest -q"
    assert description('{"command": "pytest -q", "description": "Run the tests"}') == "Run the tests"
    assert shell_command("terminal", '{"command":"ls","summary":"List files"}') == "ls"
    assert description('{"command":"ls","summary":"List files"}') == "List files"
    assert shell_command("shell", "rg -n foo src || true") == "rg -n foo src || true"  # codex: already text
    assert shell_command("shell", '{"command": ["bash", "-lc", "git log -3"]}') == "git log -3"
    assert shell_command(None, "ls -F") == "ls -F"  # SWE-agent's actions have no tool name
    assert shell_command("Read", '{"file_path": "/a.py"}') is None  # not a shell call: no hook sees it
    assert shell_command("str_replace_editor", "/workspace/a.py") is None


def test_report_over_the_stored_runs(tmp_path, trajectories_dir):
    out = report(tmp_path, "--backend", "bm25", "--json", str(trajectories_dir))
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data["files"]) == set(ADAPTERS)  # every format was read
    rows = data["rows"]

    # Every tool output is counted once: wrapped in a family, left alone, or another tool's.
    total = 0
    for unit in discover_units(trajectories_dir):
        name = detect_format(trajectories_dir / unit)
        if name:
            total += len(ADAPTERS[name].iter_observations(ADAPTERS[name].load(trajectories_dir / unit)))
    assert sum(row["outputs"] for row in rows.values()) == total
    families = set(rows) - {LEFT_ALONE, OTHER}
    assert families and families <= set(DEFAULT_PATTERNS)
    for family in (LEFT_ALONE, OTHER):  # passed through: nothing saved
        assert rows[family]["tokens_after"] == rows[family]["tokens_before"] and rows[family]["pruned"] == 0
    read = rows["read"]  # whole-file reads; bounded ones (sed -n A,Bp, head) are left alone (hooks/patterns.py)
    assert read["pruned"] >= 3 and read["tokens_after"] < read["tokens_before"] / 2
    assert sum(row["failure_lines"] for row in rows.values()) >= sum(row["failure_kept"] for row in rows.values())

    table = report(tmp_path, "--backend", "bm25", "--limit", "40", str(trajectories_dir))
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith("| family | outputs | pruned | tokens before | tokens after |")
    assert "Tokens: characters / 4 (estimate)" in table.stdout


def test_report_errors_are_one_line(tmp_path):
    missing = report(tmp_path, str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and missing.stderr.strip().count("\n") == 0
    assert "no such file or folder" in missing.stderr
    (tmp_path / "notes.txt").write_text("not a run\n")
    empty = report(tmp_path, "--backend", "bm25", str(tmp_path))
    assert empty.returncode == 1 and "no stored agent runs found" in empty.stderr
