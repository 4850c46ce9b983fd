"""The fast Qwen 3.5 linear-attention kernels: is this process about to run the slow torch fallback?

Qwen 3.5's Gated DeltaNet layers use flash-linear-attention (``fla``: chunk_gated_delta_rule) and
causal-conv1d (causal_conv1d_fn). transformers imports them once, when its modeling module is imported,
and on *any* exception (not installed, or a causal-conv1d compiled against another torch: "undefined
symbol") silently runs reference PyTorch code instead, over ten times slower on an H100. So a package
that is merely present proves nothing: this module imports each kernel the way transformers does and
runs one tiny op with it on the GPU, and names what fails, once per process, before the first step.

    python jobs/check_kernels.py [--require]   # one line per problem; --require: exit 1 on any (GPU nodes)
"""

from __future__ import annotations

import importlib
import logging
from typing import Any, Callable

log = logging.getLogger(__name__)

# distribution -> (module, function) as transformers' qwen3_5 modeling resolves them
LINEAR_ATTENTION_KERNELS = {"flash-linear-attention": ("fla.ops.gated_delta_rule", "chunk_gated_delta_rule"),
                            "causal-conv1d": ("causal_conv1d", "causal_conv1d_fn")}
_warned = False


def _run_causal_conv1d(fn: Callable, device: str) -> None:
    import torch

    x = torch.randn(1, 8, 16, device=device, dtype=torch.bfloat16)  # (batch, channels, length)
    weight = torch.randn(8, 4, device=device, dtype=torch.bfloat16)  # (channels, kernel width)
    out = fn(x, weight, None, activation="silu")
    if tuple(out.shape) != (1, 8, 16) or not torch.isfinite(out.float()).all():
        raise RuntimeError(f"unexpected output {tuple(out.shape)}")


def _run_gated_delta_rule(fn: Callable, device: str) -> None:
    import torch

    q, k, v = (torch.randn(1, 64, 2, 32, device=device, dtype=torch.bfloat16) for _ in range(3))  # (B, T, H, D)
    g = -torch.rand(1, 64, 2, device=device, dtype=torch.float32)  # log decay, < 0
    beta = torch.rand(1, 64, 2, device=device, dtype=torch.bfloat16)
    out = fn(q, k, v, g=g, beta=beta, use_qk_l2norm_in_kernel=True)
    out = out[0] if isinstance(out, tuple) else out
    if tuple(out.shape) != (1, 64, 2, 32) or not torch.isfinite(out.float()).all():
        raise RuntimeError(f"unexpected output {tuple(out.shape)}")


_TINY_OPS = {"flash-linear-attention": _run_gated_delta_rule, "causal-conv1d": _run_causal_conv1d}


def kernel_problems(device: str | None = None) -> dict[str, str]:
    """distribution -> one line on why the fast kernel will not run here (empty: both import and run).

    ``device``: where to run the tiny op; default the first CUDA device (none: only imports are checked,
    and a missing CUDA is reported, since these kernels are CUDA-only).
    """
    problems: dict[str, str] = {}
    if device is None:
        try:
            import torch

            device = "cuda" if torch.cuda.is_available() else None
        except ImportError:
            device = None
    for distribution, (module_name, function) in LINEAR_ATTENTION_KERNELS.items():
        try:
            fn = getattr(importlib.import_module(module_name), function)
        except Exception as error:  # noqa: BLE001 - transformers swallows the same and falls back
            problems[distribution] = f"does not import ({type(error).__name__}: {str(error).splitlines()[0][:160]})"
            continue
        if device is None:
            problems[distribution] = "imports, but no CUDA device here to run it on"
            continue
        try:
            _TINY_OPS[distribution](fn, device)
        except Exception as error:  # noqa: BLE001 - any failure means the slow path at training time
            problems[distribution] = f"imports but a tiny op fails ({type(error).__name__}: {str(error).splitlines()[0][:160]})"
    return problems


def missing_kernels() -> list[str]:
    """Distributions whose kernel does not import and run here (see kernel_problems)."""
    return sorted(kernel_problems())


def uses_linear_attention(model: Any) -> bool:
    config = getattr(model, "config", None)
    model_type = str(getattr(config, "model_type", ""))
    return model_type.startswith("qwen3_5") or hasattr(config, "linear_num_value_heads")


def warn_if_slow_kernels(model: Any, *, use_gpu: bool) -> dict[str, str]:
    """Log one warning per process when a Qwen 3.5 model will train on the GPU without the fast kernels."""
    global _warned
    problems = kernel_problems() if use_gpu and uses_linear_attention(model) else {}
    if problems and not _warned:
        _warned = True
        log.warning("Qwen 3.5 linear attention is running transformers' slow PyTorch fallback (often 10x slower "
                    "per step): %s. Install with the cluster.yaml setup commands (causal-conv1d built with "
                    "--no-build-isolation after torch)", "; ".join(f"{k} {v}" for k, v in problems.items()))
    return problems


def report(require: bool = False) -> int:
    """Print which kernels import and run here (jobs/check_kernels.py); 1 when one fails and ``require``."""
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if not has_cuda:  # head and CPU nodes: nothing to check (the GPU nodes run the same command)
        print("kernels: no CUDA device here; the Qwen 3.5 kernels are checked on GPU nodes")
        return 0
    problems = kernel_problems()
    for distribution, problem in problems.items():
        print(f"kernels: {distribution} {problem}")
    if not problems:
        print("kernels: flash-linear-attention and causal-conv1d import and run")
    return 1 if problems and require else 0

