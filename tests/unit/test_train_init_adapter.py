"""model.init_adapter: training goes on from a saved LoRA adapter, its weights trainable, not a fresh one."""

from __future__ import annotations

import torch

from squeez_ray.train.config import LoraSection, ModelSection


def test_continue_lora_loads_the_saved_weights_trainable(tmp_path, tiny_qwen3_dir):
    from squeez_ray.train.model import apply_lora, continue_lora, load_base_model

    model_cfg = ModelSection(base=str(tiny_qwen3_dir), dtype="float32")
    trained = apply_lora(load_base_model(str(tiny_qwen3_dir), model_cfg), LoraSection(r=4, alpha=8))
    with torch.no_grad():  # a fresh adapter has lora_B = 0; give it weights a fresh one would not have
        for name, param in trained.named_parameters():
            if "lora_B" in name:
                param.normal_()
    trained.save_pretrained(tmp_path / "adapter")
    saved = {n: p.detach().clone() for n, p in trained.named_parameters() if "lora_" in n}

    resumed = continue_lora(load_base_model(str(tiny_qwen3_dir), model_cfg), str(tmp_path / "adapter"))
    again = {n: p for n, p in resumed.named_parameters() if "lora_" in n}
    assert again.keys() == saved.keys() and saved
    assert all(torch.equal(again[n].detach(), saved[n]) for n in saved)
    assert all(p.requires_grad for p in again.values())
    assert not any(p.requires_grad for n, p in resumed.named_parameters() if "lora_" not in n)
