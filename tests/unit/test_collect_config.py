"""The shipped collect.yaml loads; every config problem is reported at once; earlier output that
cannot be read stops a resume with the shard's name; manifest counts add up."""

from __future__ import annotations

from pathlib import Path

import pytest

from squeez_ray.collect.pipeline import SHARD_DIR, CollectConfig, done_commands, summarize
from squeez_ray.config import ConfigError, load_config
from squeez_ray.schema import DataError, write_observations

YAML = Path(__file__).resolve().parents[2] / "jobs" / "configs" / "collect.yaml"


def test_shipped_yaml_loads_and_opens_with_its_command(tmp_path):
    assert YAML.read_text().startswith("# python jobs/collect.py --config jobs/configs/collect.yaml")
    (tmp_path / "i.jsonl").write_text("")
    (tmp_path / "mirrors").mkdir()
    config = load_config(CollectConfig, YAML, [f"instances={tmp_path / 'i.jsonl'}", f"mirrors={tmp_path / 'mirrors'}",
                                                f"output_dir={tmp_path / 'out'}", "workers=3"])
    assert config.workers == 3 and len(config.tool_types) == 14 and 3 <= config.min_calls <= config.max_calls <= 7


def test_all_problems_reported_together():
    with pytest.raises(ConfigError) as info:
        load_config(CollectConfig, YAML, ["min_calls=5", "max_calls=2", "timeout_s=0", "tool_types=[ls, rm]",
                                          "instances=/nonexistent.jsonl", "decoy_rate=2", "bogus=1"])
    text = str(info.value)
    for needle in ("instances: /nonexistent.jsonl is not a file", "mirrors: required", "output_dir: required",
                   "min_calls/max_calls", "timeout_s: must be > 0", "tool_types: ['rm'] not allowed",
                   "decoy_rate: 2.0 is not between 0 and 1", "bogus: unknown key"):
        assert needle in text, text


def obs(iid: str, command: str) -> dict:
    return {"instance_id": iid, "repo": "o/r", "base_commit": "a" * 40, "tool_type": "ls", "command": command,
            "exit_code": 0, "duration_s": 0.01, "tool_output": "x\n", "truncated": False, "error": None}


def test_done_commands_reads_shards_and_names_a_broken_one(tmp_path):
    assert done_commands(tmp_path) == {}
    write_observations([obs("a", "ls -la -- ."), obs("a", "ls -la -- src"), obs("b", "ls -la -- .")],
                       tmp_path / SHARD_DIR / "part-1-x.parquet")
    assert done_commands(tmp_path) == {"a": {"ls -la -- .", "ls -la -- src"}, "b": {"ls -la -- ."}}
    broken = tmp_path / SHARD_DIR / "part-2-y.parquet"
    broken.write_bytes(b"PAR1 not really parquet")
    with pytest.raises(DataError, match="part-2-y.parquet.*cannot be read"):
        done_commands(tmp_path)


def test_summarize_counts_per_status_and_tool_type():
    def row(tool_type, status, error=None, truncated=False, exit_code=0):
        return {"instance_id": "a", "tool_type": tool_type, "status": status, "error": error, "duration_s": 0.5,
                "truncated": truncated, "exit_code": exit_code, "shard": "part-1.parquet" if status == "written" else None}

    summary = summarize([row("grep", "written", exit_code=1), row("grep", "skipped"), row("ls", "written", truncated=True),
                         row("test_output", "written", error="timeout: killed after 60s", exit_code=-9),
                         row("read_file", "rejected", error="UnsafePathError: ..."), row("grep", "empty", exit_code=1),
                         row(None, "instance_failed", error="no mirror for x/y")], instances=2, already_written=5)
    counts = summary["counts"]
    assert counts["observations_written"] == 3 and counts["observations_total"] == 8
    assert counts["observations_skipped_already_written"] == 1 and counts["calls_rejected"] == 1
    assert counts["empty_outputs_not_written"] == 1 and counts["instances_failed"] == 1
    assert counts["by_tool_type"]["grep"] == {"written": 1, "skipped": 1, "empty": 1, "nonzero_exit": 1,
                                              "timeouts": 0, "truncated": 0}
    assert counts["by_tool_type"]["test_output"]["timeouts"] == 1
    assert counts["tool_time_s"] == 1.5 and summary["shards_written"] == ["part-1.parquet"]
    assert {f["status"] for f in summary["failures"]} == {"written", "rejected", "instance_failed"}
