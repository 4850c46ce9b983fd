"""The collection job end to end on a local Ray: a real repository, its bare mirror and an instances
file in; Parquet observations with real outputs for every tool type and a manifest out; a second run
adds nothing; a run cut short completes; inputs are never written; the job's CLI reports bad input
in one line."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from squeez_ray.collect.pipeline import SHARD_DIR, CollectConfig, collect
from squeez_ray.collect.tools import TOOL_TYPES
from squeez_ray.collect.toy import build_toy_dataset
from squeez_ray.schema import OBSERVATION_SCHEMA, read_observations
from squeez_ray.testing.checks import tree_digest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return build_toy_dataset(tmp_path_factory.mktemp("toy"))


def config(toy, out: Path, **changes) -> CollectConfig:
    # 14 calls per instance: every applicable tool type once, so each type is checked every run.
    base = dict(instances=str(toy["instances"]), mirrors=str(toy["mirrors"]), output_dir=str(out), seed=3,
                min_calls=14, max_calls=14, workers=2, cpus_per_worker=0.5, instances_per_shard=1, timeout_s=120)
    return CollectConfig(**{**base, **changes})


def keys(rows):
    return Counter((r["instance_id"], r["command"]) for r in rows)


@pytest.mark.slow  # three job runs of 2 x 14 real tool calls: about 30 s idle, more on a busy machine
def test_collect_resume_and_partial_run(ray_local, toy, tmp_path):
    inputs_before = tree_digest(toy["mirrors"]), toy["instances"].read_bytes()
    out = tmp_path / "raw"
    manifest = collect(config(toy, out))

    rows = read_observations(out / SHARD_DIR)
    counts = manifest["counts"]
    assert counts["instances"] == 2 and counts["instances_failed"] == 0
    assert counts["observations_written"] == len(rows) == counts["observations_total"]
    # The tracked symlink out of the tree is the one planned call that must be refused, never run.
    assert all(f["status"] == "rejected" and "hosts.txt" in f["error"] for f in manifest["failures"]
               if f["status"] != "written")
    by_type = {r["tool_type"] for r in rows}
    assert by_type == set(TOOL_TYPES), set(TOOL_TYPES) - by_type
    for row in rows:
        assert row["repo"] == "toy/calc" and len(row["base_commit"]) == 40
        assert row["tool_output"].strip(), row  # every observation holds real output
        assert row["exit_code"] is not None and row["duration_s"] > 0 and row["error"] is None
    failing = [r for r in rows if r["tool_type"] == "test_output" and r["instance_id"] == "toy__calc-1"]
    assert failing and "ZeroDivisionError" in failing[0]["tool_output"]
    assert all("Could not resolve host" in r["tool_output"] for r in rows if r["tool_type"] == "curl")
    assert max(keys(rows).values()) == 1
    shards = sorted((out / SHARD_DIR).glob("part-*.parquet"))
    assert len(shards) == 2  # one per batch of one instance
    import pyarrow.parquet as pq

    assert pq.read_schema(shards[0]).equals(OBSERVATION_SCHEMA, check_metadata=False)
    assert manifest["network_isolation"].startswith("unshare") and manifest["git_revision"]
    assert set(manifest["counts"]["by_tool_type"]) == set(TOOL_TYPES)
    assert (out / "manifest.json").is_file()

    # Resume: the same command again plans the same calls and finds every one written.
    again = collect(config(toy, out))
    assert again["counts"]["observations_written"] == 0
    assert again["counts"]["observations_skipped_already_written"] == len(rows)
    assert sorted((out / SHARD_DIR).glob("part-*.parquet")) == shards

    # A run cut short: one shard lost, another holding only part of its rows. The next run completes.
    lost = pq.read_table(shards[0]).num_rows
    shards[0].unlink()
    partial = pq.read_table(shards[1])
    pq.write_table(partial.slice(0, 4), shards[1])
    lost += partial.num_rows - 4
    third = collect(config(toy, out))
    assert third["counts"]["observations_written"] == lost
    assert third["counts"]["observations_skipped_already_written"] == len(rows) - lost
    final = read_observations(out / SHARD_DIR)
    assert keys(final) == keys(rows)  # the same (instance, command) set, each exactly once
    assert third["counts"]["observations_total"] == len(rows)

    assert (tree_digest(toy["mirrors"]), toy["instances"].read_bytes()) == inputs_before
    assert not any(p.name.startswith("PWNED") for p in tmp_path.rglob("*"))
    assert not any(p.name.startswith("PWNED") for p in Path(toy["src"]).parent.rglob("*"))


def test_job_cli_reports_bad_input_in_one_line(toy, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instance_id": "x", "repo": "toy/calc", "base_commit": "not hex"}\n')
    result = subprocess.run([sys.executable, str(REPO_ROOT / "jobs" / "collect.py"), "--config",
                             str(REPO_ROOT / "jobs" / "configs" / "collect.yaml"), f"instances={bad}",
                             f"mirrors={toy['mirrors']}", f"output_dir={tmp_path / 'out'}"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "row 0" in result.stderr and "field 'base_commit'" in result.stderr and "Traceback" not in result.stderr
    result = subprocess.run([sys.executable, str(REPO_ROOT / "jobs" / "collect.py"), "--config",
                             str(REPO_ROOT / "jobs" / "configs" / "collect.yaml"), "workers=0", "tool_types=[ls, rm]"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    for text in ("instances: required", "workers: must be >= 1", "tool_types: ['rm'] not allowed"):
        assert text in result.stderr, result.stderr
