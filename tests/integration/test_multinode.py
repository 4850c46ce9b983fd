"""Two nodes on one machine: a Ray head and a worker node as separate raylets (``ray.cluster_utils.Cluster``),
the jobs' work spread over both, then the worker node killed mid-job. Each job must finish (or resume)
to the result of an undisturbed run, with nothing lost and nothing duplicated.

How the work is forced onto both nodes: each node has 1 CPU and every actor asks for 0.75, so no node
holds two. How the kill lands mid-job: a test thread waits until the job has written its first output
(a shard, a scored part, a done-marker, a checkpoint), checks that the job's actors are alive on both
nodes at that moment (Ray state API), and removes the worker node.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
ONE_PER_NODE = 0.75  # CPUs per actor on 1-CPU nodes: exactly one actor per node


class TwoNodes:
    """The cluster, its worker node (replaced after each kill) and the Ray state queries the tests need."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.worker = None

    def ensure_worker(self):
        if self.worker is None:
            self.worker = self.cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
            self.cluster.wait_for_nodes()
        return self.worker

    @property
    def worker_id(self) -> str:
        return self.worker.node_id

    @property
    def head_id(self) -> str:
        return self.cluster.head_node.node_id

    def actor_nodes(self, class_part: str, *, alive_only: bool = True) -> Counter:
        """Node id -> number of this cluster's actors whose class name contains ``class_part``."""
        from ray.util.state import list_actors

        actors = list_actors(address=self.cluster.address, limit=10_000, raise_on_missing_output=False)
        return Counter(a.node_id for a in actors
                       if class_part in (a.class_name or "") and (not alive_only or a.state == "ALIVE"))

    def kill_worker_when(self, ready, class_part: str) -> dict:
        """Start a thread that, once ``ready()`` is true and the job's actors are alive on both nodes,
        records where they are and removes the worker node. Returns the dict it fills (``nodes``, ``killed``, ``error``)."""
        record: dict = {"killed": False}
        worker = self.worker

        def watch():
            try:
                deadline = time.time() + 300
                # The kill point: the job has written output and has actors alive on both nodes
                # (an actor may still be starting on one node while the other has finished a batch).
                while not (ready() and len(nodes := self.actor_nodes(class_part)) == 2):
                    if time.time() > deadline:
                        record["error"] = "the job never reached the kill point"
                        return
                    time.sleep(0.1)
                record["nodes"] = nodes
                self.cluster.remove_node(worker, allow_graceful=False)
                record["killed"] = True
            except Exception as error:  # noqa: BLE001 - reported by the test, not lost in a thread
                record["error"] = repr(error)

        self.worker = None
        record["thread"] = threading.Thread(target=watch, daemon=True)
        record["thread"].start()
        return record

    def check_kill(self, record: dict) -> None:
        record["thread"].join(timeout=60)
        assert record.get("killed"), record.get("error")
        # At the moment of the kill the job had an actor alive on each node: the work was spread.
        assert record["nodes"].get(self.head_id, 0) >= 1 and len(record["nodes"]) == 2, record["nodes"]


@pytest.fixture(scope="module")
def two_nodes():
    """One head + one worker node on loopback for the whole module; the session's local Ray (if a
    test before this module started one) is stopped and started again afterwards."""
    import ray
    from ray.cluster_utils import Cluster

    restart_local = ray.is_initialized()
    if restart_local:
        ray.shutdown()
    # ray.init rewrites a loopback address to the machine's outward IP (where nothing listens) unless
    # Ray is told to stay on this host: the constant for this process (read when ray is imported, so
    # patched), the variable for the raylets and workers it starts. Head, worker and driver: 127.0.0.1.
    from ray._private import ray_constants

    saved = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"), ray_constants.ENABLE_RAY_CLUSTER
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": True, "dashboard_host": "127.0.0.1",
        "dashboard_port": 0})
    nodes = TwoNodes(cluster)
    try:
        nodes.ensure_worker()
        ray.init(address=cluster.address, log_to_driver=False)
        yield nodes
    finally:
        ray.shutdown()
        cluster.shutdown()
        ray_constants.ENABLE_RAY_CLUSTER = saved[1]
        if saved[0] is None:
            os.environ.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
        else:
            os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = saved[0]
        # Cluster records its head for later `ray.init()` calls to join; a dead record makes them hang.
        record = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
        if record.exists() and record.read_text().strip() == cluster.address:
            record.unlink(missing_ok=True)
        if restart_local:
            ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"RAY_AUTH_MODE": "disabled", "VLLM_CPU_KVCACHE_SPACE": "1",
                                               "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}})


# ---------------------------------------------------------------------------------------------------
# Collection


def test_collect_survives_losing_a_node(two_nodes, tmp_path):
    from squeez_ray.collect.pipeline import SHARD_DIR, CollectConfig, collect
    from squeez_ray.collect.toy import build_toy_dataset
    from squeez_ray.schema import read_observations

    toy = build_toy_dataset(tmp_path / "toy", extra_instances=4)  # 6 instances, one shard each

    def config(out):
        # Cheap tool types only: the point is where the work runs, not what the tools print. No `ls`:
        # it prints file times, and the two runs may check out in different minutes.
        return CollectConfig(instances=str(toy["instances"]), mirrors=str(toy["mirrors"]), output_dir=str(out),
                             seed=3, min_calls=3, max_calls=3, tool_types=["read_file", "grep", "git_log"],
                             workers=2, cpus_per_worker=ONE_PER_NODE, instances_per_shard=1, timeout_s=60)

    def content(out):
        rows = read_observations(out / SHARD_DIR)
        keys = Counter((r["instance_id"], r["command"]) for r in rows)
        assert max(keys.values()) == 1, "an observation was written twice"
        return {(r["instance_id"], r["command"]): r["tool_output"] for r in rows}

    two_nodes.ensure_worker()
    reference = tmp_path / "reference"
    collect(config(reference))
    assert set(two_nodes.actor_nodes("CollectWorker", alive_only=False)) == {two_nodes.head_id, two_nodes.worker_id}

    out = tmp_path / "out"
    kill = two_nodes.kill_worker_when(lambda: any((out / SHARD_DIR).glob("part-*.parquet")), "CollectWorker")
    manifest = collect(config(out))
    two_nodes.check_kill(kill)
    expected = content(reference)
    assert content(out) == expected and len(expected) >= 12  # 6 instances, 2-3 distinct calls each
    assert manifest["counts"]["observations_total"] == len(expected) and manifest["counts"]["instances_failed"] == 0


# ---------------------------------------------------------------------------------------------------
# Bulk evaluation


def test_bulk_evaluation_survives_losing_a_node(two_nodes, public_cases_path, tmp_path):
    import pyarrow.parquet as pq

    from squeez_ray.infer.registry import BackendOptions
    from squeez_ray.evaluate.bulk import PARTS_DIR, BulkSettings, evaluate_bulk
    from squeez_ray.evaluate.local import SystemSpec, evaluate_to_dir

    systems = [SystemSpec.parse("bm25")]
    local = tmp_path / "local"
    evaluate_to_dir(public_cases_path, systems, local, options=BackendOptions())  # no Ray: the reference

    def rows(out):
        table = pq.read_table(out / "per_example.parquet").to_pylist()
        return sorted(({k: v for k, v in r.items() if k != "latency_ms"} for r in table),
                      key=lambda r: r["example_index"])

    two_nodes.ensure_worker()
    out = tmp_path / "bulk"
    kill = two_nodes.kill_worker_when(lambda: any((out / PARTS_DIR).rglob("part-*.jsonl")), "SystemWorker")
    evaluate_bulk(public_cases_path, systems, out, options=BackendOptions(), echo=False,
                  bulk=BulkSettings(workers=2, batch_size=4, cpus_per_worker=ONE_PER_NODE))
    two_nodes.check_kill(kill)
    got = rows(out)
    assert [r["example_index"] for r in got] == list(range(67))  # each example once
    assert got == rows(local)


# ---------------------------------------------------------------------------------------------------
# Re-prune


def test_reprune_survives_losing_a_node(two_nodes, trajectories_dir, tmp_path):
    from squeez_ray.infer.registry import BackendOptions
    from squeez_ray.trajectories.pipeline import (
        REPORT_FILES,
        RepruneConfig,
        run_reprune,
    )
    from squeez_ray.trajectories.process import STATE_DIR, RepruneSettings

    def reprune(out):
        settings = RepruneSettings(input_dir=str(trajectories_dir), output_dir=str(out))
        return run_reprune(RepruneConfig(settings=settings, backend="bm25", options=BackendOptions(), workers=2,
                                         files_per_batch=1, cpus_per_worker=ONE_PER_NODE), echo=False)

    def tree(root):
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
                if p.is_file() and p.relative_to(root).parts[0] not in REPORT_FILES}

    two_nodes.ensure_worker()
    reference = tmp_path / "reference"
    expected = reprune(reference)
    assert set(two_nodes.actor_nodes("RepruneWorker", alive_only=False)) == {two_nodes.head_id, two_nodes.worker_id}

    out = tmp_path / "out"
    kill = two_nodes.kill_worker_when(lambda: any((out / STATE_DIR / "done").rglob("*.json")), "RepruneWorker")
    summary = reprune(out)
    two_nodes.check_kill(kill)
    assert tree(out) == tree(reference)
    assert summary["total"] == expected["total"] and not summary["failed_files"]
    def units(root):  # one done-marker per unit, each unit once
        markers = [json.loads(p.read_text())["unit"] for p in (root / STATE_DIR / "done").rglob("*.json")]
        assert len(markers) == len(set(markers))
        return set(markers)

    assert units(out) == units(reference)


# ---------------------------------------------------------------------------------------------------
# Training


def test_training_resumes_from_the_shared_checkpoint_after_losing_a_node(two_nodes, tmp_path):
    from squeez_ray.config import load_config
    from squeez_ray.train.config import TrainConfig
    from squeez_ray.train.run import run_training
    from squeez_ray.train.synthetic import synthetic_rows, write_jsonl

    labelled = write_jsonl(synthetic_rows(48, seed=1), tmp_path / "labelled.jsonl")
    storage = tmp_path / "shared-storage"  # both raylets see this folder: it stands for NFS / S3
    config = load_config(TrainConfig, REPO / "jobs/configs/tiny_cpu.yaml", {
        "data.train_path": str(labelled), "run.storage_path": str(storage), "run.name": "two-nodes",
        "data.repeat": 1, "train.logging_steps": 1, "train.max_steps": 4, "train.save_steps": 2,
        "run.max_failures": 2, "scaling.num_workers": 2, "scaling.cpus_per_worker": ONE_PER_NODE})

    two_nodes.ensure_worker()
    first_checkpoint = storage / "two-nodes" / "checkpoint_000002"
    snapshot = storage / "two-nodes" / "checkpoint_manager_snapshot.json"
    # Killed once Ray Train has committed the step-2 checkpoint (every rank reported it and the
    # controller recorded it), not merely once its files exist: an uncommitted one is not resumed from.
    kill = two_nodes.kill_worker_when(lambda: snapshot.is_file() and first_checkpoint.name in snapshot.read_text(),
                                      "RayTrainWorker")

    # The job runs in a thread: a new node can only be started from the main thread (Ray's node
    # launcher installs signal handlers), and a fixed-size worker group needs one.
    result: dict = {}

    def train():
        try:
            result["outcome"] = run_training(config)
        except BaseException as error:  # noqa: BLE001 - re-raised below, on the test's thread
            result["error"] = error

    job = threading.Thread(target=train, daemon=True)
    job.start()
    while kill["thread"].is_alive() and job.is_alive():  # a job that fails early reports why, now
        kill["thread"].join(timeout=1)
    if "error" in result:
        raise result["error"]
    two_nodes.check_kill(kill)
    two_nodes.ensure_worker()  # what a cluster's autoscaler does: a new node takes the lost one's place
    job.join(timeout=600)
    if "error" in result:
        raise result["error"]
    outcome = result["outcome"]

    assert outcome.checkpoint.endswith("checkpoint_000004")
    assert outcome.metrics["step"] == 4
    assert outcome.metrics["start_step"] == 2  # the restarted workers began at the shared checkpoint
    history = json.loads((Path(outcome.checkpoint) / "trainer_state.json").read_text())["log_history"]
    before = json.loads((first_checkpoint / "trainer_state.json").read_text())["log_history"]
    losses = [e["loss"] for e in history if "loss" in e]
    assert len(losses) == 4 and all(math.isfinite(x) for x in losses)
    assert losses[:2] == [e["loss"] for e in before if "loss" in e]  # restored, not recomputed
