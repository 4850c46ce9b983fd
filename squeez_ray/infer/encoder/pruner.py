"""The encoder as a backend: ``squeez --backend encoder --model DIR`` and everywhere else a backend goes.

One backend name, two runtimes, chosen by what the directory holds: ``model.int8.onnx`` /
``model.onnx`` (from ``jobs/export_encoder.py``, or written by training) run on ONNX Runtime without
torch (``onnx_runtime``); a checkpoint without them runs on torch + transformers. No ``--model`` at
all means the model shipped inside the package (``squeez_ray/models/default``). Both runtimes share
windowing, scoring, calibration and gap bridging; only the forward pass differs.
"""

from __future__ import annotations

from pathlib import Path


from squeez_ray.infer.encoder.scoring_pruner import ScoringPruner
from squeez_ray.infer.registry import BackendOptions

DEFAULT_MODEL_DIR = Path(__file__).resolve().parents[2] / "models" / "default"


class EncoderPruner(ScoringPruner):
    """The torch runtime (training checkpoints without an ONNX export; GPUs)."""

    def __init__(self, model_dir: str | Path, *, device: str | None = None, dtype: str | None = None,
                 threshold: float | None = None, tokens_per_batch: int = 8192, threads: int | None = None,
                 recall_target: float | None = None, max_kept_lines: int | None = None,
                 engine_kwargs: dict | None = None):
        import torch

        from squeez_ray.infer.encoder.model import load_scorer

        if threads:
            torch.set_num_threads(threads)
        from squeez_ray.infer.encoder.fusion import load_fusion

        self.model, self.tokenizer, self.settings = load_scorer(model_dir)
        self.fusion = load_fusion(model_dir, self.settings.fusion)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device).eval()
        # None: bf16 autocast where the device has fast bf16 kernels (~10x slower than fp32 where it has
        # none, on AVX2-only CPUs); "bfloat16" / "float32" force it on / off.
        self.dtype = dtype
        self.choose_decoder(engine_kwargs)
        # torch scores are fp32's (bf16 moves them less than int8 does): fp32's curve, else the training point
        self.choose_operating_point("fp32", threshold=threshold, recall_target=recall_target,
                                    max_kept_lines=max_kept_lines)
        self.tokens_per_batch = tokens_per_batch
        self.name = f"encoder:{Path(model_dir).name}"
        from squeez_ray.infer.encoder.scoring import torch_forward

        self._forward = torch_forward(self.model, self.dtype)


def resolve_model_dir(model: str | None) -> Path:
    """The directory the encoder backend loads: ``model`` (a directory or a hub id), else the shipped default."""
    if not model:
        if not DEFAULT_MODEL_DIR.is_dir():
            raise FileNotFoundError(f"the shipped default encoder is missing from {DEFAULT_MODEL_DIR}: "
                                    "reinstall squeez-ray, or pass --model DIR")
        return DEFAULT_MODEL_DIR
    from squeez_ray.hub import resolve_model

    return Path(resolve_model(model, what="--model"))


def build_encoder(options: BackendOptions) -> ScoringPruner:
    from squeez_ray.infer.encoder.onnx_runtime import OnnxEncoderPruner, has_onnx

    model_dir = resolve_model_dir(options.model)
    engine = {k: v for k, v in options.engine_kwargs.items() if k in ("tokens_per_batch", "threads")}
    decoding = {k: v for k, v in options.engine_kwargs.items() if k in ("decoder", "shortlist_tokens", "negative_gate")}
    runtime = options.engine_kwargs.get("runtime")  # "onnx" / "torch" to force one; None: by the files
    if runtime not in (None, "onnx", "torch"):
        raise ValueError(f"engine_kwargs.runtime must be onnx or torch, not {runtime!r}")
    if runtime == "onnx" or runtime is None and has_onnx(model_dir):
        # bfloat16 is a torch setting (serve configs carry it): on ONNX it means the default file.
        dtype = None if options.dtype in ("bfloat16", "bf16") else options.dtype
        name = "encoder:default" if not options.model else None
        return OnnxEncoderPruner(model_dir, dtype=dtype, threshold=options.threshold, name=name,
                                 recall_target=options.recall_target, max_kept_lines=options.max_kept_lines,
                                 engine_kwargs=decoding, **engine)
    return EncoderPruner(model_dir, device=options.device, dtype=options.dtype, threshold=options.threshold,
                         recall_target=options.recall_target, max_kept_lines=options.max_kept_lines,
                         engine_kwargs=decoding, **engine)
