"""The training job on a real local Ray (2 CPU workers): checkpoints, automatic restart after a failure,
resume on resubmission, in-training evaluation, DeepSpeed ZeRO-2 on CPU."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from squeez_ray.config import load_config
from squeez_ray.prompt import PROMPT_FORMAT
from squeez_ray.train.config import TrainConfig
from squeez_ray.train.run import TrainJobError, run_training
from squeez_ray.train.synthetic import synthetic_rows, write_jsonl

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """A small canonical labelled set (train + dev splits), never the public eval cases."""
    return write_jsonl(synthetic_rows(48, seed=1), tmp_path_factory.mktemp("data") / "labelled.jsonl")


def _config(labelled, storage, **overrides):
    values = {"data.train_path": str(labelled), "run.storage_path": str(storage), "data.repeat": 1,
              "train.logging_steps": 1, **overrides}
    return load_config(TrainConfig, REPO / "jobs/configs/tiny_cpu.yaml", values)


def _log_history(checkpoint):
    return json.loads((Path(checkpoint) / "trainer_state.json").read_text())["log_history"]


def test_restart_after_failure_then_resume_on_resubmission(ray_local, labelled, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    # Attempt 1 crashes at step 3 (injected); Ray restarts the workers, which resume from the step-2 checkpoint.
    first = run_training(_config(labelled, tmp_path, **{
        "run.name": "resume", "train.max_steps": 4, "train.save_steps": 2, "train.debug_fail_at_step": 3,
        "run.max_failures": 1, "eval.enabled": True, "eval.num_examples": 2, "eval.max_new_tokens": 8}))
    assert first.checkpoint.endswith("checkpoint_000004")
    assert first.metrics["start_step"] == 2 and first.metrics["step"] == 4
    assert first.metrics["tokens_per_s"] > 0 and first.metrics["learning_rate"] > 0
    assert 0.0 <= first.metrics["eval_f1"] <= 1.0 and 0.0 <= first.metrics["eval_compression"] <= 1.0
    assert first.counts["train_examples"] == sum(1 for r in synthetic_rows(48, seed=1) if r["split"] == "train")
    losses = [e["loss"] for e in _log_history(first.checkpoint) if "loss" in e]
    assert len(losses) == 4 and all(math.isfinite(x) for x in losses)

    meta = json.loads((Path(first.checkpoint) / "squeez_train.json").read_text())
    assert meta["base_model"] == "tiny-qwen3" and meta["prompt_format"] == PROMPT_FORMAT
    # the scores ride on the checkpoint (every rank evaluated a shard), so jobs/merge.py can pick the best one
    assert meta["metrics"]["eval_f1"] == first.metrics["eval_f1"]
    assert Path(meta["base_model_path"], "config.json").is_file() and meta["data"]["train_examples"] > 0
    manifest = json.loads(Path(first.manifest).read_text())
    assert manifest["latest_checkpoint"] == first.checkpoint and manifest["counts"] == first.counts

    # Resubmitting the same run (same storage path + name) continues from step 4, not from zero.
    second = run_training(_config(labelled, tmp_path, **{"run.name": "resume", "train.max_steps": 6,
                                                          "train.save_steps": 2}))
    assert second.metrics["start_step"] == 4 and second.metrics["step"] == 6
    history = _log_history(second.checkpoint)
    assert [e["loss"] for e in history if "loss" in e][:4] == losses  # restored, not recomputed
    kept = sorted(p.name for p in (tmp_path / "resume").glob("checkpoint_0*"))
    assert kept == ["checkpoint_000004", "checkpoint_000006"]  # keep_checkpoints: 2


def test_deepspeed_zero2_on_cpu_runs_two_steps(ray_local, labelled, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # the DeepSpeed config path is relative to the working directory
    outcome = run_training(_config(labelled, tmp_path, **{
        "run.name": "zero2", "train.deepspeed": "jobs/configs/deepspeed_zero2.json", "train.max_steps": 2,
        "train.save_steps": 2, "run.max_failures": 0}))
    assert outcome.metrics["step"] == 2 and math.isfinite(outcome.metrics["loss"])
    shards = sorted(p.name for p in Path(outcome.checkpoint).rglob("*optim_states.pt"))
    assert len(shards) == 2, shards  # one ZeRO optimizer shard per rank, merged into one checkpoint


@pytest.mark.no_cluster  # starts no Ray, Serve or vLLM: runs beside the cluster streams
def test_missing_inputs_are_reported_before_anything_starts(tmp_path):
    config = load_config(TrainConfig, REPO / "jobs/configs/tiny_cpu.yaml",
                         {"data.train_path": str(tmp_path / "nope.jsonl"), "run.storage_path": str(tmp_path)})
    with pytest.raises(TrainJobError, match="nope.jsonl does not exist"):
        run_training(config)
