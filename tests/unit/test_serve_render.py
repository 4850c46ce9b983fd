"""`serve deploy` builds the application on the cluster, so the served model and card must be in the config:
the GPU config carries the model path docs/CLUSTER.md's merge step writes and no hard-coded card, and render writes a checked copy."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from squeez_ray.testing.jobs import load_job

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
GPU_CONFIGS = ["serve_configs/pruner_gpu.yaml"]


def _args(document: dict) -> dict:
    return document["applications"][0]["args"]


def test_no_document_sets_the_model_by_environment_in_front_of_serve_deploy():
    texts = {p: p.read_text() for p in [REPO / "README.md", *REPO.glob("docs/*.md"), *REPO.glob("serve_configs/*.yaml")]}
    bad = [f"{p.name}: {line.strip()}" for p, text in texts.items() for line in text.splitlines()
           if re.search(r"SQUEEZ_SERVE_MODEL=\S+.*\bserve deploy\b", line)]
    assert not bad, "the cluster builds the app and never sees this variable:\n" + "\n".join(bad)


@pytest.mark.parametrize("name", GPU_CONFIGS)
def test_gpu_config_serves_the_merged_model_on_any_gpu(name):
    args = _args(yaml.safe_load((REPO / name).read_text()))
    assert "accelerator_type" not in args  # a hard-coded A100 waits forever on an H100 cluster
    # Qwen 3.5 is hybrid: vLLM 0.32's align-mode prefix caching never hits an ~80-token shared prefix (see the YAML)
    assert args["engine_kwargs"]["enable_prefix_caching"] is False
    cluster = (REPO / "docs" / "CLUSTER.md").read_text()
    assert args["model"] in cluster and f"--out {args['model']}" in cluster  # what the cluster's merge step writes


def test_render_overrides_args_and_validates(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SQUEEZ_SERVE_MODEL", "/somewhere/else")  # the shell's variable must not leak in
    out = tmp_path / "pruner.yaml"
    assert load_job("render_serve_config").main([str(REPO / "serve_configs/pruner_gpu.yaml"), "model=/mnt/shared/models/other",
                        "accelerator_type=H100", "model_deployment.autoscaling_config.max_replicas=8",
                        "--out", str(out)]) == 0
    args = _args(yaml.safe_load(out.read_text()))
    assert args["model"] == "/mnt/shared/models/other" and args["accelerator_type"] == "H100"
    assert args["model_deployment"]["autoscaling_config"] == {**args["model_deployment"]["autoscaling_config"],
                                                              "max_replicas": 8, "min_replicas": 1}
    assert load_job("render_serve_config").main([str(REPO / "serve_configs/pruner_gpu.yaml"), "modle=/x"]) == 2
    err = capsys.readouterr().err
    assert "modle" in err and "Traceback" not in err
