"""The encoder trains with Ray Train on 2 CPU workers, its scores move, and the checkpoint serves as a backend."""

from __future__ import annotations

import json

import numpy as np
import pytest

from squeez_ray.testing.tiny_encoder import one_error_examples


@pytest.mark.slow
def test_encoder_trains_on_ray_and_serves(ray_local, tmp_path):
    from squeez_ray.infer.registry import build_pruner
    from squeez_ray.config import load_config
    from squeez_ray.infer.encoder.model import EncoderSettings, load_scorer, save_scorer
    from squeez_ray.infer.encoder.scoring import score_lines
    from squeez_ray.train.encoder.run import EncoderTrainConfig, train_encoder
    from squeez_ray.schema import write_examples
    from squeez_ray.testing.tiny_encoder import build_tiny_encoder

    base = build_tiny_encoder(tmp_path / "base")
    # a trained checkpoint to distil from (the runs use the 6-layer v3): exercises the teacher path
    teacher_model, teacher_tokenizer, _ = load_scorer(base)
    save_scorer(teacher_model, teacher_tokenizer, EncoderSettings(base_model="tiny"), tmp_path / "teacher")
    write_examples(one_error_examples(24, 0), tmp_path / "train.jsonl")
    write_examples(one_error_examples(8, 1), tmp_path / "dev.jsonl")
    config = load_config(EncoderTrainConfig, None, {
        "train_data": str(tmp_path / "train.jsonl"), "dev_data": str(tmp_path / "dev.jsonl"),
        "output_dir": str(tmp_path / "model"), "base_model": str(base),
        "teacher_model": str(tmp_path / "teacher"), "distill_weight": 0.5, "storage_path": str(tmp_path / "ray"),
        "num_workers": 2, "cpus_per_worker": 0.5, "epochs": 1, "batch_size": 4, "max_steps": 2, "log_every": 1,
        "window": {"max_length": 128}, "head_learning_rate": 0.05})
    manifest = train_encoder(config)

    assert manifest["counts"]["train_examples"] == 24 and manifest["final_metrics"]["step"] == 2
    assert manifest["trained_on"] == "ray-train"
    assert np.isfinite(manifest["final_metrics"]["loss"])
    # train_dtype left at auto: the run records what it resolved to on this machine's CPU
    from squeez_ray.infer.precision import fast_bf16

    assert manifest["final_metrics"]["bf16_autocast"] == int(fast_bf16("cpu"))
    saved = json.loads((tmp_path / "model" / "squeez_encoder.json").read_text())
    assert saved["threshold"] == manifest["calibration"]["threshold"]
    assert saved["training"]["teacher_model"] == str(tmp_path / "teacher") and saved["training"]["distill_weight"] == 0.5
    assert manifest["calibration"]["recall"] >= 0.8
    assert 0.0 <= manifest["calibration"]["auc"] <= 1.0  # dev ranking AUC, overall and per tool type
    assert list(manifest["calibration"]["by_tool_type"]) == ["test_output"]
    assert manifest["calibration"]["by_tool_type"]["test_output"]["examples"] == 8

    dev = one_error_examples(8, 1)
    before_model, tokenizer, _ = load_scorer(base)
    after_model, _, settings = load_scorer(tmp_path / "model")
    pairs = [(r["query"], r["tool_output"]) for r in dev]
    before = np.concatenate(score_lines(before_model, tokenizer, settings.window, pairs, dtype="float32"))
    after = np.concatenate(score_lines(after_model, tokenizer, settings.window, pairs, dtype="float32"))
    assert not np.allclose(before, after)  # two steps moved the scores

    # training ends with the ONNX export, so the encoder backend runs the checkpoint without torch
    assert {"model.onnx", "model.int8.onnx"} <= set(manifest["onnx"])
    pruner = build_pruner("encoder", model=str(tmp_path / "model"))
    assert type(pruner).__name__ == "OnnxEncoderPruner"
    for result, row in zip(pruner.prune_batch([__import__("squeez_ray.infer.base", fromlist=["x"]).PruneRequest(
            r["query"], r["tool_output"]) for r in dev], fail_open=False), dev):
        assert set(result.text.split("\n")) <= set(row["tool_output"].split("\n")) | {""}
