"""The memory plan of a training config on one device: will one worker's step fit, before any worker starts?

Exact parameter counts come from the architecture built on the ``meta`` device (no memory, no
weights); the rest is an estimate per device batch of ``T`` padded tokens (the token budget):

- weights: parameters x the load dtype (divided across workers under ZeRO-3);
- LoRA: adapter parameters in float32 (PEFT upcasts them) + gradients + two AdamW moments: 16 bytes each
  (gradients and moments divided across workers under ZeRO-2/3);
- activations: with gradient checkpointing, every layer's input (T x hidden) plus one layer's recomputed
  internals during its backward; without it, every layer's internals;
- logits: the response-only loss projects at most one chunk of positions at a time (squeez_ray.train.loss),
  so chunk x vocabulary in the activation dtype and float32 (upcast, softmax, gradient), never T x vocabulary;
- overhead: CUDA context and workspaces, and allocator slack on the activations.

The per-layer activation coefficients are what autograd keeps for the tensors named in
``_layer_activation_bytes``; tests compare the plan with peak memory measured on CPU for a small model.
On a GPU the per-layer term is calibrated against the one GPU measurement at the recipe's shape
(``GPU_MEASUREMENT``, docs/GPU.md), with a stated margin (``GPU_ACTIVATION_MARGIN``) on the activations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squeez_ray.train.config import TINY_MODELS, TrainConfig, deepspeed_stage
from squeez_ray.train.devices import Device, GiB
from squeez_ray.train.loss import DEFAULT_CHUNK_TOKENS

CUDA_OVERHEAD_BYTES = int(1.5 * GiB)  # context, cuBLAS / NCCL workspaces
ALLOCATOR_SLACK = 1.15  # caching-allocator fragmentation on the activations (GPU)
# Autograd keeps more than the tensors named in _layer_activation_bytes (LoRA sums, transient gradient
# buffers, freed blocks the allocator has not reused yet): measured 1.4-1.8x on CPU for small Qwen 3 /
# Qwen 3.5 models (tests/unit/test_train_plan.py), so the plan takes 1.6x, erring on the large side.
AUTOGRAD_FACTOR = 1.6
# The one GPU measurement at the recipe's shape (docs/GPU.md): qwen35_2b_lora.yaml's planned batch (sequences up
# to 20,000 tokens, 65,536 tokens per batch, gradient checkpointing) on an H200, 2 LoRA steps on random weights,
# transformers' PyTorch fallback for the linear-attention layers: peak torch.cuda.max_memory_allocated 32.5 GiB,
# where the CPU-calibrated plan had 51.6 GiB of activations alone (72.0 GiB in all, 2.2x).
GPU_MEASUREMENT = {"config": "jobs/configs/qwen35_2b_lora.yaml", "device": "h200", "date": "2026-11-26",
                   "tokens_per_batch": 65536, "peak_allocated_bytes": int(32.5 * GiB)}
# On a GPU the per-layer term (the layer recomputed in the backward) is scaled by this, so that the plan's
# allocated parts (all but the CUDA context and allocator slack) come to the measured peak exactly: the
# saved layer inputs (T x hidden per layer) and the other parts are exact sizes and stay as they are.
# tests/unit/test_train_plan.py refits it from GPU_MEASUREMENT and fails if the two drift apart.
GPU_LAYER_CALIBRATION = 0.337
# The stated margin over the calibrated activations: one measurement, at one shape, on one card, with the
# slow fallback (the fast kernels keep less), and batches that may have been padded to less than the budget.
# With it the recipe plans at ~43 GiB on a GPU (1.33x the measured peak, CUDA context and slack included).
GPU_ACTIVATION_MARGIN = 1.25
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


class PlanError(ValueError):
    """The architecture of the base cannot be found without a download."""


@dataclass
class MemoryPlan:
    device: Device
    tokens_per_batch: int
    parameters: int
    lora_parameters: int
    parts: dict[str, int] = field(default_factory=dict)  # name -> bytes

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    @property
    def fits(self) -> bool:
        return self.total <= self.device.memory_bytes

    def table(self) -> str:
        rows = [(f"memory plan: one worker on {self.device.name} ({self.device.memory_bytes / GiB:.1f} GiB), "
                 f"{self.tokens_per_batch:,} padded tokens per device batch"),
                f"  parameters {self.parameters:,}; LoRA {self.lora_parameters:,}"]
        rows += [f"  {name:<34}{size / GiB:9.2f} GiB" for name, size in self.parts.items()]
        rows.append(f"  {'total':<34}{self.total / GiB:9.2f} GiB  "
                    f"({100 * self.total / self.device.memory_bytes:.0f}% of {self.device.memory_bytes / GiB:.1f} GiB)")
        rows.append("  fits" if self.fits else "  DOES NOT FIT")
        return "\n".join(rows)

    def as_dict(self) -> dict[str, Any]:
        return {"device": self.device.name, "device_bytes": self.device.memory_bytes,
                "tokens_per_batch": self.tokens_per_batch, "parameters": self.parameters,
                "lora_parameters": self.lora_parameters, "parts_bytes": dict(self.parts), "total_bytes": self.total,
                "fits": self.fits}


def model_config(config: TrainConfig) -> Any:
    """The text config of ``config.model``: random-init fields, a local checkpoint, the HF cache, or the known table."""
    from transformers import AutoConfig

    from squeez_ray.train.architectures import KNOWN_ARCHITECTURES

    base, fields = config.model.base, None
    if config.model.random_init:
        fields = dict(config.model.architecture)
    elif base in TINY_MODELS:
        import tempfile

        from squeez_ray.train import tiny

        with tempfile.TemporaryDirectory() as folder:
            (tiny.build_tiny_qwen3 if base == "tiny-qwen3" else tiny.build_tiny_qwen35)(Path(folder))
            return AutoConfig.from_pretrained(folder).get_text_config()
    elif (Path(base) / "config.json").is_file():
        return AutoConfig.from_pretrained(base).get_text_config()
    else:
        cached = _cached_config(base)
        if cached:
            return AutoConfig.from_pretrained(str(Path(cached).parent)).get_text_config()
        fields = dict(KNOWN_ARCHITECTURES.get(base) or {})
        if not fields:
            raise PlanError(f"model.base: {base} is neither a local checkpoint, in the Hugging Face cache, nor one of "
                            f"{', '.join(KNOWN_ARCHITECTURES)}: no architecture to plan with")
    model_type = fields.pop("model_type")
    return AutoConfig.for_model(model_type, **fields)


def _cached_config(repo_id: str) -> str | None:
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # noqa: BLE001 - not a valid repo id, no hub client: nothing cached
        return None
    return found if isinstance(found, str) else None


def count_parameters(text_config: Any, target_modules: Any, r: int) -> tuple[int, int]:
    """(all parameters, LoRA parameters) of the architecture built on the meta device."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(text_config)
    head = model.get_output_embeddings()
    lora = 0
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear) or module is head:
            continue
        leaf = name.rsplit(".", 1)[-1]
        if target_modules == "all-linear" or (isinstance(target_modules, list) and leaf in target_modules):
            lora += r * (module.in_features + module.out_features)
    return sum(p.numel() for p in model.parameters()), lora


def _layer_activation_bytes(c: Any, tokens: int, act: int, lora_dropout: bool) -> int:
    """What autograd keeps for one decoder layer's backward: the widest layer kind (full or linear attention)."""
    h, i = c.hidden_size, c.intermediate_size
    heads, kv = c.num_attention_heads, c.num_key_value_heads
    hd = getattr(c, "head_dim", None) or h // heads
    gated = 2 if str(getattr(c, "model_type", "")).startswith("qwen3_5") else 1  # Qwen 3.5 q_proj holds a gate
    mlp = 2 * h + 4 * i  # norm in + input, gate, up, act(gate), product (down's input)
    attention = 2 * h + gated * heads * hd + 2 * kv * hd + 3 * heads * hd + h  # q,k,v (rotated), sdpa out, o in
    widest = attention
    if hasattr(c, "linear_num_value_heads"):
        nk, nv = c.linear_num_key_heads, c.linear_num_value_heads
        dk, dv = c.linear_key_head_dim, c.linear_value_head_dim
        conv = 2 * nk * dk + nv * dv
        # projections, causal conv in/out, gate z, float32 copies inside the delta rule (x2 for 4-byte floats)
        linear = 2 * h + 3 * conv + nv * dv + 2 * (2 * conv + 2 * nv * dv)
        # the chunked delta rule (64-token chunks): float32 chunk matrices and one state per chunk
        linear += (nv * 64 * 4 * 4 + nv * dk * dv * 4 // 64) // act
        widest = max(widest, linear)
    dropout = (4 * h + i) if lora_dropout else 0  # dropout(x) copies the LoRA inputs
    return int(tokens * act * (widest + mlp + dropout) * AUTOGRAD_FACTOR)


def plan_memory(config: TrainConfig, device: Device, *, text_config: Any = None,
                gpu_calibration: float | None = None, gpu_margin: float | None = None) -> MemoryPlan:
    """``gpu_calibration`` / ``gpu_margin`` replace GPU_LAYER_CALIBRATION / GPU_ACTIVATION_MARGIN (fitting them)."""
    c = text_config if text_config is not None else model_config(config)
    params, lora = count_parameters(c, config.lora.target_modules, config.lora.r)
    tokens = config.token_budget()
    weight_bytes = DTYPE_BYTES[config.model.dtype]
    act = 2 if (config.train.bf16 or config.model.dtype != "float32") else 4
    stage = deepspeed_stage(config.train.deepspeed) or 0
    world = config.scaling.num_workers
    layers = c.num_hidden_layers
    per_layer = _layer_activation_bytes(c, tokens, act, config.lora.dropout > 0)
    on_gpu = device.kind == "gpu"
    margin = 1.0
    if on_gpu:
        per_layer = int(per_layer * (GPU_LAYER_CALIBRATION if gpu_calibration is None else gpu_calibration))
        margin = GPU_ACTIVATION_MARGIN if gpu_margin is None else gpu_margin
    if config.model.gradient_checkpointing:
        activations = layers * tokens * c.hidden_size * act + 2 * per_layer  # saved inputs + one layer, fwd + grads
    else:
        activations = layers * per_layer + per_layer
    activations = int(activations * margin)
    chunk = min(DEFAULT_CHUNK_TOKENS, tokens)
    parts = {
        "weights": params * weight_bytes // (world if stage == 3 else 1),
        "LoRA params + grads + AdamW": lora * 4 + lora * 12 // (world if stage >= 2 else 1),
        "activations" + (" (checkpointed)" if config.model.gradient_checkpointing else ""): activations,
        # body output and its gradient, the gathered response positions
        "final hidden states + grad": tokens * c.hidden_size * (act + 4),
        f"logits (response only, {chunk}-token chunks)": chunk * c.vocab_size * (act + 4 + 4 + 4),
    }
    if on_gpu:
        parts["CUDA context + allocator slack"] = CUDA_OVERHEAD_BYTES + int((ALLOCATOR_SLACK - 1) * activations)
    return MemoryPlan(device, tokens, params, lora, parts)

