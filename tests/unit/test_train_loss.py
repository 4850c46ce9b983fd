"""The response-only loss equals the stock full-logits loss, in value and in gradients, through PEFT.

float64 tiny models (Qwen3 and the Qwen 3.5 hybrid), right padding, rows of different response
lengths, and a chunk size smaller than the response so the chunked path is the one compared.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from squeez_ray.train.data import collate  # noqa: E402 - after the torch skip
from squeez_ray.train.loss import (  # noqa: E402
    causal_lm_parts,
    full_logits_loss_sum,
    response_loss_sum,
    response_only_forward,
)


@pytest.fixture(scope="module", params=["qwen3", "qwen35"])
def lora_model(request, tmp_path_factory):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from squeez_ray.train import tiny

    folder = tmp_path_factory.mktemp(request.param)
    build = tiny.build_tiny_qwen3 if request.param == "qwen3" else tiny.build_tiny_qwen35
    build(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64)
    model.config.use_cache = False
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0))
    # Non-zero B so the adapters take part in the gradients compared below.
    for name, param in peft_model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.02)
    return peft_model


def _batch(seed: int, padded: bool):
    g = torch.Generator().manual_seed(seed)
    lengths = [37, 23, 30] if padded else [30, 30, 30]
    prompts = [20, 11, 25]
    ids = [torch.randint(5, 2000, (n,), generator=g).tolist() for n in lengths]
    return collate({"input_ids": ids, "prompt_len": prompts}, pad_id=0)


def _grads(model):
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("padded", [True, False])
def test_response_only_loss_and_gradients_equal_the_full_logits_loss(lora_model, padded):
    batch = _batch(1, padded)
    lora_model.zero_grad()
    full, n_full = full_logits_loss_sum(lora_model, batch)
    (full / n_full).backward()
    expected = _grads(lora_model)
    lora_model.zero_grad()
    mine, n_mine = response_only_forward(lora_model, batch, chunk_tokens=7)  # several chunks per batch
    (mine / n_mine).backward()
    got = _grads(lora_model)
    assert n_mine == n_full == int((batch["labels"][:, 1:] != -100).sum())
    assert torch.allclose(mine, full, rtol=1e-10, atol=1e-10)
    assert expected.keys() == got.keys() and expected
    for name in expected:
        assert torch.allclose(got[name], expected[name], rtol=1e-8, atol=1e-12), name


def test_the_model_is_never_asked_for_more_than_one_position_of_logits(lora_model):
    _, head = causal_lm_parts(lora_model)
    widths = []
    hook = head.register_forward_hook(lambda m, a, out: widths.append(tuple(out.shape)))
    try:
        response_only_forward(lora_model, _batch(2, True), chunk_tokens=1000)
    finally:
        hook.remove()
    batch = _batch(2, True)
    n = int((batch["labels"][:, 1:] != -100).sum())
    # One call from the model's own forward (logits_to_keep=1), one for the gathered response positions.
    assert widths[0][:2] == (3, 1) and widths[1][0] == n


def test_a_batch_without_response_tokens_gives_zero_with_a_graph():
    hidden = torch.randn(2, 5, 4, requires_grad=True)
    head = torch.nn.Linear(4, 9, bias=False)
    total, n = response_loss_sum(head, hidden, torch.full((2, 5), -100))
    assert n == 0 and float(total) == 0.0 and total.requires_grad


def test_causal_lm_parts_names_what_is_not_a_causal_lm():
    with pytest.raises(TypeError, match="not a causal LM"):
        causal_lm_parts(torch.nn.Linear(2, 2))
