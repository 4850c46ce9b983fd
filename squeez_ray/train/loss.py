"""The response-only causal-LM loss: logits at response positions only, in chunks, never sequence x vocabulary.

The loss needs the next-token distribution only where the label is not -100 (the response, about 8% of
a long tool-output example). The stock path projects every position onto the vocabulary first: at
8 x 20,000 tokens x 248,320 (Qwen 3.5) that is ~80 GB of bf16 logits before the float32 upcast.

Here the model's own forward runs (through DDP / DeepSpeed / PEFT wrappers, so gradient sync and
ZeRO hooks behave as usual) with ``logits_to_keep=1``: the head projects one position per row, and a
forward hook on the decoder body captures its final hidden states. The response positions are
gathered (shifted by one: position t predicts label t+1) and the output head is applied to them in
chunks, each under activation checkpointing, so at most one chunk of float32 logits is alive at a time.
"""

from __future__ import annotations

from typing import Any

IGNORE_INDEX = -100
DEFAULT_CHUNK_TOKENS = 2048  # one chunk of float32 logits: 2,048 x 248,320 x 4 B = 2 GB for Qwen 3.5


def causal_lm_parts(model: Any) -> tuple[Any, Any]:
    """(decoder body, output head) of a causal LM, looking through DDP / DeepSpeed / PEFT wrappers.

    ``...ForCausalLM`` models in transformers keep the body at ``.model`` and the head at ``.lm_head``;
    PEFT's ``get_base_model()`` returns that model (LoRA never wraps the head here: "all-linear"
    excludes it).
    """
    inner = model
    for _ in range(4):  # DeepSpeedEngine / DDP hold the module in .module
        if hasattr(inner, "module") and not hasattr(inner, "lm_head") and not hasattr(inner, "get_base_model"):
            inner = inner.module
    if hasattr(inner, "get_base_model"):
        inner = inner.get_base_model()
    body, head = getattr(inner, "model", None), getattr(inner, "get_output_embeddings", lambda: None)()
    if body is None or head is None:
        raise TypeError(f"{type(inner).__name__} is not a causal LM with .model and an output head")
    return body, head


def _chunk_loss_sum(head: Any, hidden: Any, targets: Any) -> Any:
    import torch
    import torch.nn.functional as F

    logits = head(hidden)  # upcast half precision for the softmax; keep float64 as it is
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    return F.cross_entropy(logits, targets, reduction="sum")


def response_loss_sum(head: Any, hidden: Any, labels: Any, *, chunk_tokens: int = DEFAULT_CHUNK_TOKENS) -> tuple[Any, int]:
    """Sum of next-token cross-entropy over positions whose (shifted) label is not -100, and their count.

    ``hidden``: (batch, seq, hidden) final hidden states; ``labels``: (batch, seq) with -100 on prompt and
    padding. Equal to the full-logits loss sum, without building it.
    """
    import torch
    from torch.utils.checkpoint import checkpoint

    targets = labels[:, 1:]
    mask = targets != IGNORE_INDEX
    selected = hidden[:, :-1][mask]  # (n, hidden): the positions that predict a response token
    wanted = targets[mask]
    n = int(wanted.numel())
    if n == 0:  # a batch without response tokens: a zero that still touches the graph
        return hidden.sum() * 0.0, 0
    total = torch.zeros((), dtype=torch.float32, device=hidden.device)
    for start in range(0, n, chunk_tokens):
        part, goal = selected[start:start + chunk_tokens], wanted[start:start + chunk_tokens]
        if torch.is_grad_enabled():  # recompute the chunk's logits in backward instead of keeping them
            total = total + checkpoint(_chunk_loss_sum, head, part, goal, use_reentrant=False)
        else:
            total = total + _chunk_loss_sum(head, part, goal)
    return total, n


def response_only_forward(model: Any, inputs: dict[str, Any], *, chunk_tokens: int = DEFAULT_CHUNK_TOKENS) -> tuple[Any, int]:
    """Run ``model`` (wrapped or not) on ``inputs`` (input_ids, attention_mask, labels); return (loss sum, count)."""
    body, head = causal_lm_parts(model)
    captured: dict[str, Any] = {}

    def keep_hidden(module, args, output):
        captured["hidden"] = output[0] if isinstance(output, tuple) else output.last_hidden_state

    handle = body.register_forward_hook(keep_hidden)
    try:
        # logits_to_keep=1: the head runs on one position per row; labels are not passed, so the
        # model computes no loss (and no full-vocabulary upcast) of its own.
        model(input_ids=inputs["input_ids"], attention_mask=inputs.get("attention_mask"), logits_to_keep=1,
              use_cache=False)
    finally:
        handle.remove()
    if "hidden" not in captured:
        raise RuntimeError("the decoder body did not run: cannot compute the response-only loss")
    return response_loss_sum(head, captured["hidden"], inputs["labels"], chunk_tokens=chunk_tokens)


def full_logits_loss_sum(model: Any, inputs: dict[str, Any]) -> tuple[Any, int]:
    """Reference: the stock full-sequence logits and a summed cross-entropy (tests compare against it)."""
    import torch
    import torch.nn.functional as F

    logits = model(input_ids=inputs["input_ids"], attention_mask=inputs.get("attention_mask"), use_cache=False).logits
    labels = inputs["labels"][:, 1:]
    flat = logits[:, :-1].to(torch.promote_types(logits.dtype, torch.float32)).reshape(-1, logits.shape[-1])
    return F.cross_entropy(flat, labels.reshape(-1), reduction="sum", ignore_index=IGNORE_INDEX), int((labels != IGNORE_INDEX).sum())
