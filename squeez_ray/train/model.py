"""Base model resolution, loading and LoRA wrapping.

The base is resolved once on the driver (``resolve_base``) into a directory every worker and the merge
job read: a tiny random checkpoint built into the run folder, a random-weight model of a real
architecture (benchmarks), a local checkpoint, or a hub id (fetched into the HF cache on the driver by
``squeez_ray.hub.resolve_model``, which fails in one line when it cannot be had; workers then load the id
through their own cache; tests never download).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from squeez_ray.train.config import TINY_MODELS, LoraSection, ModelSection

log = logging.getLogger(__name__)


def resolve_base(model_cfg: ModelSection, run_dir: Path) -> str:
    """A directory or hub id that ``from_pretrained`` loads; builds tiny / random models into ``run_dir``."""
    if model_cfg.base in TINY_MODELS:
        target = run_dir / "base_model"
        if not (target / "config.json").is_file():  # reuse on resume: the adapter was trained on these weights
            from squeez_ray.train import tiny

            build = tiny.build_tiny_qwen3 if model_cfg.base == "tiny-qwen3" else tiny.build_tiny_qwen35
            build(target)
        return str(target)
    if model_cfg.random_init:
        target = run_dir / "base_model"
        if not (target / "config.json").is_file():
            build_random_model(model_cfg, target)
        return str(target)
    from squeez_ray.hub import is_hub_id, resolve_model

    if is_hub_id(model_cfg.base):
        # Fetch (or find) it now, before any worker starts; the id itself travels on so each node reads
        # its own cache rather than a driver-local snapshot path.
        resolve_model(model_cfg.base, what="model.base")
        return model_cfg.base
    return resolve_model(model_cfg.base, what="model.base")


def build_random_model(model_cfg: ModelSection, out_dir: Path) -> None:
    """Random weights of ``model_cfg.architecture`` with a tokenizer from ``tokenizer_from`` or the tiny one.

    For throughput benchmarks only: the weights are noise, the tokenizer matters only through its
    vocabulary size, so the tiny tokenizer (vocab 3k) is used and the embedding keeps the
    architecture's own vocab_size (the cost of the real output head is kept).
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from squeez_ray.train.tiny import save_tiny_tokenizer

    fields = dict(model_cfg.architecture)
    model_type = fields.pop("model_type")
    config = AutoConfig.for_model(model_type, **fields)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_tiny_tokenizer(out_dir, model_max_length=getattr(config, "max_position_embeddings", 32768))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, model_cfg.dtype))
    model.save_pretrained(out_dir, safe_serialization=True)


def load_tokenizer(base: str) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    if tokenizer.pad_token_id is None:  # right padding needs an id; padded positions are masked anyway
        tokenizer.pad_token = tokenizer.eos_token
    if not tokenizer.chat_template:
        # A base checkpoint without a template: use ChatML, saved with the merged checkpoint, so the
        # server's /v1/chat/completions works. The pruner itself never uses a chat template: it
        # renders the released layout by hand (squeez_ray.prompt).
        from squeez_ray.train.tiny import CHAT_TEMPLATE

        log.warning("%s has no chat template; using ChatML", base)
        tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def load_base_model(base: str, model_cfg: ModelSection, *, use_cache: bool = False) -> Any:
    """The causal LM (text-only for Qwen 3.5: AutoModelForCausalLM skips the vision tower)."""
    import torch
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {"dtype": getattr(torch, model_cfg.dtype)}
    if model_cfg.attn_implementation:
        kwargs["attn_implementation"] = model_cfg.attn_implementation
    model = AutoModelForCausalLM.from_pretrained(base, **kwargs)
    model.config.use_cache = use_cache
    return model


def apply_lora(model: Any, lora_cfg: LoraSection, *, gradient_checkpointing: bool = False) -> Any:
    """Wrap ``model`` with a fresh LoRA adapter; only the adapter's parameters require grad."""
    from peft import LoraConfig, get_peft_model

    if gradient_checkpointing:
        # With frozen embeddings the checkpointed blocks would see inputs without grad.
        model.enable_input_require_grads()
    config = LoraConfig(r=lora_cfg.r, lora_alpha=lora_cfg.alpha, lora_dropout=lora_cfg.dropout,
                        target_modules=lora_cfg.target_modules, task_type="CAUSAL_LM", bias="none")
    peft_model = get_peft_model(model, config)
    trainable, total = peft_model.get_nb_trainable_parameters()
    log.info("LoRA r=%d alpha=%d on %s: %d trainable of %d parameters", lora_cfg.r, lora_cfg.alpha,
             lora_cfg.target_modules, trainable, total)
    return peft_model


def continue_lora(model: Any, adapter_dir: str, *, gradient_checkpointing: bool = False) -> Any:
    """Wrap ``model`` with the trained LoRA adapter in ``adapter_dir``, trainable, to go on training it."""
    from peft import PeftModel

    if gradient_checkpointing:
        model.enable_input_require_grads()
    peft_model = PeftModel.from_pretrained(model, adapter_dir, is_trainable=True)
    trainable, total = peft_model.get_nb_trainable_parameters()
    log.info("LoRA from %s: %d trainable of %d parameters", adapter_dir, trainable, total)
    return peft_model


def lora_target_names(peft_model: Any) -> list[str]:
    """The leaf module names LoRA wrapped (e.g. q_proj, in_proj_qkv, down_proj), for manifests and tests."""
    names = set()
    for name, module in peft_model.named_modules():
        if hasattr(module, "lora_A") and name:
            names.add(name.rsplit(".", 1)[-1])
    return sorted(names)

