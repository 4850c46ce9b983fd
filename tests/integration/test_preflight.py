"""jobs/preflight.py on the local Ray: checks run in the training workers' placement group, one line per problem."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from squeez_ray.config import load_config
from squeez_ray.train.config import TrainConfig
from squeez_ray.train.preflight import run_preflight

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "jobs"))
import preflight as preflight_job  # noqa: E402


def test_a_sound_config_passes_on_the_workers_nodes(ray_local, tmp_path):
    data = tmp_path / "train.jsonl"
    data.write_text("{}\n")
    config = load_config(TrainConfig, REPO / "jobs/configs/tiny_cpu.yaml",
                         {"data.train_path": str(data), "run.storage_path": str(tmp_path / "runs")})
    assert run_preflight(config, constraints=str(REPO / "constraints.txt"), timeout_s=120) == []
    assert not list((tmp_path / "runs").glob(".squeez-preflight-*"))  # the marker is removed again


def test_every_problem_is_one_line_naming_the_node_and_the_job_exits_2(ray_local, tmp_path, capsys):
    pins = tmp_path / "pins.txt"
    pins.write_text("transformers==0.0.1\nno-such-package==1.0\nray==2.60.0\n")
    code = preflight_job.main(["--config", str(REPO / "jobs/configs/tiny_cpu.yaml"), "--constraints", str(pins),
                               "--timeout", "120", f"data.train_path={tmp_path / 'missing.parquet'}",
                               f"model.base={tmp_path / 'no-model'}", f"run.storage_path={tmp_path / 'runs'}"])
    assert code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("preflight: worker")]
    text = "\n".join(lines)
    assert "transformers 5.19.0 is installed; pins.txt says 0.0.1" in text
    assert "data.train_path" in text and "missing.parquet does not exist" in text
    assert "no-model" in text  # the base model does not resolve on the node
    assert "no-such-package" not in text  # pins of packages the job does not need are compared only if installed
    assert all(" on " in line for line in lines)  # each names the node it was found on
