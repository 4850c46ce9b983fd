"""The training step itself, in process (no Ray): the real recipe's architecture (tiny Qwen 3.5 hybrid)
with PEFT all-linear, through the same TrainingArguments and Trainer the Ray workers use; then merge."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from squeez_ray.config import load_config
from squeez_ray.prompt import DEFAULT_SYSTEM_PROMPT, PROMPT_FORMAT
from squeez_ray.train.config import TrainConfig
from squeez_ray.train.data import collate, encode_example, training_row
from squeez_ray.train.loop import METADATA_FILE, _trainer_class, training_arguments
from squeez_ray.train.merge import merge_adapter
from squeez_ray.train.model import apply_lora, load_base_model, load_tokenizer, lora_target_names
from squeez_ray.train.synthetic import synthetic_rows

pytestmark = pytest.mark.no_cluster  # starts no Ray, Serve or vLLM: runs beside the cluster tests
REPO = Path(__file__).resolve().parents[2]
STEPS = 8


@pytest.fixture(scope="module")
def tiny_qwen35_dir(tmp_path_factory):
    from squeez_ray.train.tiny import build_tiny_qwen35

    return build_tiny_qwen35(tmp_path_factory.mktemp("tiny-qwen35"))


@pytest.fixture(scope="module")
def trained(tiny_qwen35_dir, tmp_path_factory):
    """LoRA-train the tiny Qwen 3.5 for a few steps on one repeated batch; keep what the tests compare."""
    config = load_config(TrainConfig, REPO / "jobs/configs/tiny_cpu.yaml",
                         {"model.base": str(tiny_qwen35_dir), "train.max_steps": STEPS, "train.learning_rate": 1e-2,
                          "train.logging_steps": 1, "train.save_steps": STEPS, "train.warmup_ratio": 0.0,
                          "train.lr_scheduler": "constant", "scaling.num_workers": 1})
    base = str(tiny_qwen35_dir)
    tokenizer = load_tokenizer(base)
    model = apply_lora(load_base_model(base, config.model), config.lora)
    base_before = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}
    lora_before = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}
    encoded = [encode_example(tokenizer, training_row(r), max_seq_length=1024) for r in synthetic_rows(2)]
    batch = collate({"input_ids": [np.array(e.input_ids) for e in encoded], "prompt_len": [e.prompt_len for e in encoded]},
                    pad_id=tokenizer.pad_token_id)
    out_dir = tmp_path_factory.mktemp("out")
    trainer = _trainer_class()(model=model, args=training_arguments(config, str(out_dir), world_size=1),
                               train_dataset=[batch] * STEPS)
    trainer.train()
    checkpoint = out_dir / f"checkpoint-{STEPS}"
    (checkpoint / METADATA_FILE).write_text(json.dumps({
        "base_model": "tiny-qwen35", "base_model_path": base, "prompt_format": PROMPT_FORMAT,
        "system_prompt": DEFAULT_SYSTEM_PROMPT, "config": {"model": {"dtype": "float32"}}, "global_step": STEPS}))
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return dict(model=model, base_before=base_before, lora_before=lora_before, losses=losses, batch=batch,
                checkpoint=checkpoint, tmp=out_dir)


def test_all_linear_covers_attention_linear_attention_and_mlp(trained):
    names = set(lora_target_names(trained["model"]))
    assert {"in_proj_qkv", "in_proj_z", "in_proj_a", "in_proj_b", "out_proj"} <= names  # Gated DeltaNet
    assert {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"} <= names
    assert "lm_head" not in names


def test_loss_is_finite_and_falls_on_a_repeated_batch(trained):
    losses = trained["losses"]
    assert len(losses) == STEPS and all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0] - 0.3, losses


def test_lora_parameters_moved_and_base_parameters_did_not(trained):
    params = dict(trained["model"].named_parameters())
    moved = [n for n, before in trained["lora_before"].items() if not torch.equal(params[n], before)]
    assert len(moved) == len(trained["lora_before"]) > 0
    changed = [n for n, before in trained["base_before"].items() if not torch.equal(params[n], before)]
    assert changed == []
    assert all(not params[n].requires_grad for n in trained["base_before"])


def test_merged_checkpoint_computes_what_the_adapter_does(trained):
    from transformers import AutoModelForCausalLM

    merged_dir = trained["tmp"] / "merged"
    manifest = merge_adapter(trained["checkpoint"], merged_dir)
    assert manifest["prompt_format"] == PROMPT_FORMAT and manifest["global_step"] == STEPS
    saved = json.loads((merged_dir / "manifest.json").read_text())
    assert saved["system_prompt"] == DEFAULT_SYSTEM_PROMPT and saved["adapter"] == str(trained["checkpoint"])
    assert "chat_template" in json.loads((merged_dir / "tokenizer_config.json").read_text())
    # Readable by the Serve replicas' user as any folder is (a mkdtemp staging folder would stay 0700)
    umask = os.umask(0)
    os.umask(umask)
    assert merged_dir.stat().st_mode & 0o777 == 0o777 & ~umask
    merged = AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.float32).eval()
    peft_model = trained["model"].eval()
    batch = {k: v[:1] for k, v in trained["batch"].items() if k != "labels"}
    with torch.no_grad():
        expected = peft_model(**batch).logits
        actual = merged(**batch).logits
        base_logits = AutoModelForCausalLM.from_pretrained(manifest["base_model_path"], dtype=torch.float32)(**batch).logits
    assert torch.allclose(actual, expected, atol=1e-4)
    assert not torch.allclose(actual, base_logits, atol=1e-4)  # the merge did change the model
    # Writing over an existing folder needs the explicit flag.
    from squeez_ray.train.merge import MergeError

    with pytest.raises(MergeError, match="overwrite"):
        merge_adapter(trained["checkpoint"], merged_dir)
