"""The collection actor's work without Ray: plan, check out, run, write one atomic shard; skip what is
written; keep timed-out runs as observations marked with their error. (Ray itself: the integration test.)"""

from __future__ import annotations

import json
from dataclasses import asdict

import pyarrow as pa
import pytest

from squeez_ray.schema.instances import read_instances
from squeez_ray.collect.pipeline import SHARD_DIR, CollectConfig, CollectWorker, done_commands
from squeez_ray.collect.toy import build_toy_dataset
from squeez_ray.schema import read_observations


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return build_toy_dataset(tmp_path_factory.mktemp("toy"))


def batch(toy, done: dict[str, set[str]] | None = None) -> pa.Table:
    return pa.Table.from_pylist([{**row, "FAIL_TO_PASS": json.dumps(row["FAIL_TO_PASS"]),
                                  "done_commands": json.dumps(sorted((done or {}).get(row["instance_id"], ())))}
                                 for row in read_instances(toy["instances"])])


def worker(toy, out, **changes) -> CollectWorker:
    config = CollectConfig(instances=str(toy["instances"]), mirrors=str(toy["mirrors"]), output_dir=str(out),
                           work_dir=str(out / "work"), seed=1, **changes)
    return CollectWorker(asdict(config), run_id="t1")


def test_worker_writes_one_shard_then_skips_everything_written(toy, tmp_path):
    summary = worker(toy, tmp_path)(batch(toy)).to_pylist()
    written = [s for s in summary if s["status"] == "written"]
    shards = list((tmp_path / SHARD_DIR).glob("part-t1-*.parquet"))
    assert len(shards) == 1 and {s["shard"] for s in written} == {shards[0].name}
    rows = read_observations(shards[0])
    assert len(rows) == len(written) >= 3
    assert {r["instance_id"] for r in rows} == {"toy__calc-1", "toy__calc-2"}
    # Planned calls per instance are within 3..7 (written + empty + rejected).
    per_instance = {iid: sum(s["instance_id"] == iid and s["tool_type"] is not None for s in summary)
                    for iid in ("toy__calc-1", "toy__calc-2")}
    assert all(3 <= n <= 7 for n in per_instance.values()), per_instance

    again = worker(toy, tmp_path)(batch(toy, done_commands(tmp_path))).to_pylist()
    assert not [s for s in again if s["status"] == "written"]
    assert sum(s["status"] == "skipped" for s in again) == len(rows)
    assert list((tmp_path / SHARD_DIR).glob("*.parquet")) == shards


def test_timeouts_are_kept_as_observations_with_their_error(toy, tmp_path):
    summary = worker(toy, tmp_path, timeout_s=0.001, tool_types=["test_output"], min_calls=1,
                     max_calls=1, keep_empty=True)(batch(toy)).to_pylist()
    rows = read_observations(tmp_path / SHARD_DIR)
    assert rows and all(r["error"].startswith("timeout") and r["exit_code"] < 0 for r in rows)
    assert all(s["status"] == "written" and s["error"] for s in summary if s["tool_type"])


def test_missing_mirror_fails_the_instance_not_the_batch(toy, tmp_path):
    rows = batch(toy).to_pylist()
    rows[0]["repo"] = "other/missing"
    summary = worker(toy, tmp_path)(pa.Table.from_pylist(rows)).to_pylist()
    failed = [s for s in summary if s["status"] == "instance_failed"]
    assert len(failed) == 1 and "no mirror for other/missing" in failed[0]["error"]
    assert any(s["status"] == "written" and s["instance_id"] == rows[1]["instance_id"] for s in summary)
