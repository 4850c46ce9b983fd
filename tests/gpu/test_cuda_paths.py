"""The CUDA paths, on a GPU node: a LoRA step of the real recipe's architecture on cuda in bf16, and
the vllm backend loading a checkpoint on cuda. Skipped without CUDA (tests/conftest.py marks every
test in this folder), so CPU machines and CI pass without them; run them on a GPU node with
``pytest tests/gpu``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from squeez_ray.config import load_config
from squeez_ray.testing.checks import assert_verbatim_result, sample_requests
from squeez_ray.train.config import TrainConfig
from squeez_ray.train.data import collate, encode_example, training_row
from squeez_ray.train.model import apply_lora, load_base_model, load_tokenizer
from squeez_ray.train.synthetic import synthetic_rows

REPO = Path(__file__).resolve().parents[2]


def test_a_lora_step_on_cuda_in_bf16_changes_only_the_adapter(tiny_qwen35_dir):
    config = load_config(TrainConfig, REPO / "jobs/configs/qwen35_2b_lora.yaml",
                         {"model.base": str(tiny_qwen35_dir), "model.dtype": "bfloat16"})
    base = str(tiny_qwen35_dir)
    tokenizer = load_tokenizer(base)
    model = apply_lora(load_base_model(base, config.model), config.lora).to("cuda")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    encoded = [encode_example(tokenizer, training_row(r), max_seq_length=1024) for r in synthetic_rows(2)]
    batch = collate({"input_ids": [np.array(e.input_ids) for e in encoded], "prompt_len": [e.prompt_len for e in encoded]},
                    pad_id=tokenizer.pad_token_id)
    batch = {k: torch.as_tensor(v).to("cuda") for k, v in batch.items()}
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss).item() and next(model.parameters()).device.type == "cuda"
    changed = {n for n, p in model.named_parameters() if not torch.equal(p.detach(), before[n])}
    assert changed and all("lora_" in n for n in changed)


def test_vllm_backend_loads_on_cuda_and_returns_only_source_lines(tiny_qwen3_dir):
    from squeez_ray.infer.registry import build_pruner

    pruner = build_pruner("vllm", model=str(tiny_qwen3_dir),
                          engine_kwargs={"max_model_len": 1024, "gpu_memory_utilization": 0.2})
    try:
        requests = sample_requests()
        results = pruner.prune_batch(requests, fail_open=False)
    finally:
        pruner.close()
    for request, result in zip(requests, results):
        assert_verbatim_result(result, request.tool_output)
        assert result.pruned
