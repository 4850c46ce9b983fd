"""Every cluster command in docs/CLUSTER.md reads and writes storage cluster.yaml provides; storage_path is never node-local."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from squeez_ray.config import ConfigError, load_config
from squeez_ray.train.config import TrainConfig
from squeez_ray.train.storage import filesystem_type, multinode_storage_problem

REPO = Path(__file__).resolve().parents[2]


def _shared_mounts() -> list[str]:
    """Mount points that cluster.yaml's setup commands create on every node (network file systems)."""
    cluster = yaml.safe_load((REPO / "cluster.yaml").read_text())
    mounts = []
    for command in cluster["setup_commands"]:
        for match in re.finditer(r"mount -t (nfs4?|efs)\b.*?\s(\S+:/\S*)\s+(/\S+?)\)?(?:\s|$)", command):
            mounts.append(match.group(3))
    return mounts


def _cluster_commands() -> list[str]:
    text = (REPO / "docs" / "CLUSTER.md").read_text()
    section = text.split("## The cluster and its commands", 1)[1]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    joined = re.sub(r"\\\n\s*", " ", block)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")
            and ("ray job submit" in line or "serve deploy" in line)]


def test_cluster_yaml_mounts_shared_storage_on_every_node():
    assert _shared_mounts() == ["/mnt/shared"]
    cluster = yaml.safe_load((REPO / "cluster.yaml").read_text())
    # setup_commands run on the head and on every worker (no per-group override drops them); the top-level
    # head_setup_commands / worker_setup_commands run after them, in addition.
    assert not any("worker_setup_commands" in g or "setup_commands" in g
                   for g in cluster["available_node_types"].values())
    assert "setup_commands" in cluster


def test_every_documented_cluster_path_is_on_the_shared_mount_or_an_object_store():
    mounts = _shared_mounts()
    commands = _cluster_commands()
    assert len(commands) >= 7  # collect, label, build, train, merge, evaluate, reprune, serve
    paths = []
    for command in commands:
        for token in shlex.split(command):
            value = token.split("=", 1)[1] if "=" in token and not token.startswith("-") else token
            for part in value.strip("[]'\"").split(","):
                if part.startswith(("/", "s3://", "gs://")):
                    paths.append((command, part))
    assert paths
    for command, path in paths:
        ok = path.startswith(("s3://", "gs://")) or any(path == m or path.startswith(m + "/") for m in mounts)
        assert ok, f"{path} in `{command[:80]}...` is not on cluster.yaml's shared storage {mounts}"
    train = next(c for c in commands if "jobs/train.py" in c)
    assert "run.storage_path=/mnt/shared/" in train


def test_gpu_configs_never_store_runs_node_locally():
    zero = yaml.safe_load((REPO / "jobs/configs/qwen35_2b_lora_zero.yaml").read_text())
    assert zero["run"]["storage_path"].startswith(tuple(m + "/" for m in _shared_mounts()))


def test_relative_storage_is_refused_with_a_cluster_address_or_spread_workers(monkeypatch):
    config = REPO / "jobs/configs/tiny_cpu.yaml"
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    load_config(TrainConfig, config, {})  # embedded local Ray: a relative folder is fine
    with pytest.raises(ConfigError, match="relative, so node-local .workers spread"):
        load_config(TrainConfig, config, {"scaling.placement_strategy": "SPREAD", "scaling.num_workers": 2})
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    with pytest.raises(ConfigError, match="RAY_ADDRESS names a cluster"):
        load_config(TrainConfig, config, {})
    load_config(TrainConfig, config, {"run.storage_path": "s3://bucket/runs"})
    load_config(TrainConfig, config, {"run.storage_path": "/mnt/shared/runs"})


def test_multinode_storage_needs_a_network_file_system(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/root / ext4 rw 0 0\n"
                      "fs-1.efs.us-west-2.amazonaws.com:/ /mnt/shared nfs4 rw,vers=4.1 0 0\n"
                      "tmpfs /tmp tmpfs rw 0 0\n")
    assert filesystem_type("/mnt/shared/runs/x", str(mounts)) == "nfs4"
    assert multinode_storage_problem("/mnt/shared/runs", 3, str(mounts)) is None
    assert multinode_storage_problem("s3://bucket/runs", 3, str(mounts)) is None
    assert multinode_storage_problem("/home/ubuntu/runs", 1, str(mounts)) is None  # one node: local is shared
    problem = multinode_storage_problem("/home/ubuntu/runs", 3, str(mounts))
    assert problem and "node-local file system (ext4)" in problem and "3 nodes" in problem
