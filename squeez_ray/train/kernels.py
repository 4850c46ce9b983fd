"""The fast Qwen 3.5 linear-attention kernels: is this process about to run the slow torch fallback?

Qwen 3.5's Gated DeltaNet layers use flash-linear-attention (``fla``: chunk_gated_delta_rule) and
causal-conv1d when they import (transformers 5.19 resolves them once, when its modeling module is
imported, and otherwise runs reference PyTorch code, over ten times slower on an H100). Both are in
the ``gpu`` extra; this names what is missing, once per process, before the first step.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Any

log = logging.getLogger(__name__)

# import name -> distribution to install
LINEAR_ATTENTION_KERNELS = {"fla": "flash-linear-attention", "causal_conv1d": "causal-conv1d"}
_warned = False


def missing_kernels() -> list[str]:
    """Distributions of the fast kernels that are not importable here."""
    missing = []
    for module, distribution in LINEAR_ATTENTION_KERNELS.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(distribution)
    return missing


def uses_linear_attention(model: Any) -> bool:
    config = getattr(model, "config", None)
    model_type = str(getattr(config, "model_type", ""))
    return model_type.startswith("qwen3_5") or hasattr(config, "linear_num_value_heads")


def warn_if_slow_kernels(model: Any, *, use_gpu: bool) -> list[str]:
    """Log one warning per process when a Qwen 3.5 model will train on the GPU without the fast kernels."""
    global _warned
    missing = missing_kernels() if uses_linear_attention(model) else []
    if missing and use_gpu and not _warned:
        _warned = True
        log.warning("Qwen 3.5 linear attention is running transformers' slow PyTorch fallback (%s not installed; "
                    "often 10x slower per step): pip install 'squeez-ray[gpu]' or pip install %s",
                    ", ".join(missing), " ".join(missing))
    return missing
