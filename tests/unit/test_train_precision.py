"""bf16 autocast only where it is fast: "auto" resolves per device, training and torch scoring alike.

On an AVX2-only CPU (this project's VM) bf16 autocast ran a MiniLM step ~10x slower than float32, and
the encoder recipes asked for bf16: a 5,098-example retrain showed no step in 13 minutes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from squeez_ray.infer.encoder import scoring as encoder_scoring
from squeez_ray.infer import precision
from squeez_ray.train.encoder.run import EncoderTrainConfig


@pytest.mark.parametrize("fast", [True, False])
def test_auto_picks_bf16_only_where_the_device_has_fast_kernels(monkeypatch, fast):
    monkeypatch.setattr(precision, "fast_bf16", lambda device_type: fast)
    assert precision.resolve_dtype("auto", "cpu") == ("bfloat16" if fast else "float32")
    # an explicit choice is kept whatever the hardware
    assert precision.resolve_dtype("bfloat16", "cpu") == "bfloat16"
    assert precision.resolve_dtype("float32", "cuda") == "float32"


def test_an_unknown_dtype_is_refused_by_the_config_and_the_resolver():
    assert EncoderTrainConfig(train_dtype="auto", train_data="t.parquet", dev_data="d.parquet").validate() == []
    problems = EncoderTrainConfig(train_dtype="float16", train_data="t.parquet", dev_data="d.parquet").validate()
    assert any("train_dtype" in p and "auto" in p for p in problems)
    with pytest.raises(ValueError, match="float16"):
        precision.resolve_dtype("float16", "cpu")


class _Probe(torch.nn.Module):
    """Records whether autocast was on when it ran; returns one score per line."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.autocast: list[bool] = []

    def forward(self, ids, mask, types, owner, n_lines):
        self.autocast.append(torch.is_autocast_enabled("cpu"))
        return torch.zeros(ids.shape[0], n_lines) + self.weight


@pytest.mark.parametrize("dtype, fast, expected", [(None, False, False), (None, True, True), ("auto", False, False),
                                                   ("bfloat16", False, True), ("float32", True, False)])
def test_torch_scoring_autocasts_as_asked_or_as_the_device_allows(monkeypatch, dtype, fast, expected):
    monkeypatch.setattr(precision, "fast_bf16", lambda device_type: fast)
    probe = _Probe()
    forward = encoder_scoring.torch_forward(probe, dtype)
    arrays = [np.zeros((1, 4), dtype=np.int64) for _ in range(4)]
    assert forward(*arrays, 3).shape == (1, 3)
    assert probe.autocast == [expected]


def test_the_encoder_recipes_leave_the_choice_to_the_hardware():
    from squeez_ray.config import load_config
    from squeez_ray.quickstart import REPO_ROOT

    configs = sorted((REPO_ROOT / "jobs" / "configs").glob("encoder_*.yaml"))
    trained = [c for c in configs if "train_dtype" in c.read_text()]
    assert trained and all(load_config(EncoderTrainConfig, c, []).train_dtype == "auto" for c in trained)
