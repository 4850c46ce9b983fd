"""scripts/record_output.py: a real command's output becomes a valid, unedited pool row, or a clear refusal."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from squeez_ray.collect.pool import check_digest, read_pool

pytestmark = pytest.mark.unit

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "record_output.py"


def record(tmp_path, *extra):
    return subprocess.run([sys.executable, str(SCRIPT), "--pool", str(tmp_path / "pool.jsonl"), "--family", "ls_find",
                           "--cwd", str(tmp_path), "--licence", "MIT", "--versions", "here@1", *extra],
                          capture_output=True, text=True, timeout=60)


def test_stdout_and_stderr_are_kept_in_order_and_the_row_passes_the_pools_check(tmp_path):
    run = record(tmp_path, "--source", "gh:someone/tool",
                 "--shell", "printf 'a\\nb\\n'; echo oops >&2; printf 'c\\nd\\ne\\n\\n\\n'; exit 3")
    assert run.returncode == 0, run.stderr
    row = json.loads((tmp_path / "pool.jsonl").read_text())
    assert row["tool_output"] == "a\nb\noops\nc\nd\ne"  # merged in order, trailing newlines stripped
    assert row["exit_code"] == 3 and row["cwd"] == tmp_path.name and check_digest(row)
    assert list(read_pool(tmp_path / "pool.jsonl")) == [row["output_id"]]
    assert run.stdout.startswith(row["output_id"])


def test_short_outputs_and_reserved_sources_are_refused_with_one_line(tmp_path):
    short = record(tmp_path, "--source", "gh:someone/tool", "--", "echo", "one line")
    assert short.returncode == 2 and "under 5" in short.stderr and "Traceback" not in short.stderr
    reserved = record(tmp_path, "--source", "gh:pallets/flask", "--shell", "seq 1 10")
    assert reserved.returncode == 2 and "reserved for evaluation" in reserved.stderr
    assert not (tmp_path / "pool.jsonl").exists()
