"""Whether bfloat16 autocast pays on a device: encoder training (train/encoder/run.py) and torch scoring.

bf16 autocast halves matmul cost only where the hardware has bf16 kernels: CUDA GPUs from Ampere on,
and CPUs whose oneDNN has them (AVX512-BF16 / AMX natively, AVX512 by conversion). On an AVX2-only
CPU oneDNN has none and PyTorch falls back to slow reference kernels: one MiniLM-L6 step of 2 x 512
tokens (forward + backward, one thread) took 23.6 s in bf16 against 1.9-4.7 s in float32 on this
project's 2-core AMD EPYC VM (2026-11-26), so "auto" trains in float32 there.
"""

from __future__ import annotations

AUTOCAST_DTYPES = ("auto", "bfloat16", "float32")


def fast_bf16(device_type: str) -> bool:
    """True where bf16 autocast is faster than float32 on ``device_type`` ("cuda" or "cpu")."""
    import torch

    if device_type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    try:  # oneDNN's own answer: the kernels autocast would run
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a private op: fall back to the ISA PyTorch dispatches to
        return "AVX512" in torch.backends.cpu.get_cpu_capability()


def autocast_bf16(dtype: str | None, device_type: str) -> bool:
    """Whether to run bf16 autocast: asked for ("bfloat16" / "bf16"), or left to the device (None /
    "auto") where it is fast; any other dtype (float32) runs without."""
    if dtype in (None, "auto"):
        return fast_bf16(device_type)
    return dtype in ("bfloat16", "bf16")


def resolve_dtype(setting: str, device_type: str) -> str:
    """``setting`` as given, or for "auto" bfloat16 where it is fast on ``device_type``, else float32."""
    if setting not in AUTOCAST_DTYPES:
        raise ValueError(f"dtype {setting!r}: use one of {', '.join(AUTOCAST_DTYPES)}")
    return "bfloat16" if autocast_bf16(setting, device_type) else "float32"
