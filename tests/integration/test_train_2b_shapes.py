"""The real Qwen 3.5 2B shapes (random weights, bf16) through jobs/train.py on CPU: 1 LoRA step at 768 tokens (the system prompt alone is ~300).

The 2,048-token, 2-step run is tests/bench/bench_train_2b_cpu.py (minutes per step on 2 cores); this
runs the same code path small enough for CI: loss finite, every LoRA B matrix moved, the worker's
peak memory within a factor of the plan.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests/bench"))

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_two_b_architecture_trains_one_lora_step_on_cpu(tmp_path):
    import bench_train_2b_cpu

    result = bench_train_2b_cpu.bench(tokens=768, steps=1, work=tmp_path)
    assert result["loss_finite"] and result["lora_moved"], result
    # The worker's peak RSS holds the interpreter, Ray and libraries beside what the plan counts.
    assert 0.3 <= result["plan_over_peak"] <= 2.0, result
