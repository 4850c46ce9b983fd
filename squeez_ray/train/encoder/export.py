"""Export a trained encoder checkpoint to ONNX: encoder + line head + sigmoid as one graph, plus an
int8 dynamically quantised copy, with everything the torch-free runtime (``infer/encoder/onnx_runtime``) reads.

An exported directory holds:

- ``model.onnx``: fp32 graph. Inputs ``input_ids``, ``attention_mask``, ``token_type_ids``,
  ``line_of_token`` (int64, batch x tokens) and ``lines`` (int64, the window-line numbers 0..L-1);
  output ``probs`` (float32, batch x L keep-probabilities). Batch, tokens and L are dynamic axes.
- ``model.int8.onnx``: the same with int8 weights (onnxruntime ``quantize_dynamic``; activations are
  quantised per batch at run time), about a quarter of the size.
- ``tokenizer.json`` (``tokenizers``), ``squeez_encoder.json`` (windows, calibrated threshold, gap
  bridging, the special token ids), ``manifest.json`` of the checkpoint when it has one.

The exporter is torch's dynamo-based one (``torch.onnx.export(..., dynamo=True)``, the default and
the maintained path in torch 2.9+; the TorchScript exporter is deprecated), at opset 18.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from squeez_ray.infer.encoder.onnx_runtime import ONNX_FP32, ONNX_INT8, TOKENIZER_FILE

INPUT_NAMES = ["input_ids", "attention_mask", "token_type_ids", "line_of_token", "lines"]
OPSET = 18


def _graph_module(model: Any):
    from torch import nn

    class ProbsGraph(nn.Module):
        """What the ONNX graph computes: the scorer's line logits through a sigmoid."""

        def __init__(self, scorer: Any):
            super().__init__()
            self.scorer = scorer

        def forward(self, input_ids, attention_mask, token_type_ids, line_of_token, lines):
            return self.scorer.line_logits(input_ids, attention_mask, token_type_ids, line_of_token, lines).sigmoid()

    return ProbsGraph(model).eval()


def _example_inputs():
    """Two windows of different lengths (padding present), so no axis is specialised to a constant."""
    import torch

    from squeez_ray.infer.encoder.windows import pad_windows

    rows = [[101, 2054, 102, 7, 8, 102, 9, 102, 10, 11, 12, 102], [101, 2054, 102, 7, 102, 9, 102]]
    types = [[0, 0, 0] + [1] * (len(r) - 3) for r in rows]
    owner = [[-1, -1, -1, 0, 0, 0, 1, 1, 2, 2, 2, 2], [-1, -1, -1, 0, 0, 1, 1]]
    return (*pad_windows(rows, types, owner, 0), torch.arange(3))


def use_eager_attention(model: Any) -> None:
    """Export attention as plain MatMul + Add(mask) + Softmax, not as traced SDPA.

    Traced ``scaled_dot_product_attention`` becomes, in every layer, an ``IsNaN`` + ``Where`` pass
    over the batch x heads x tokens x tokens scores (its guard for fully masked rows, which line
    windows never have). On a 2-core CPU those passes were 40% of the int8 graph's time: the eager
    graph scores the same 300-line output 1.4x faster with the same scores (the parity test holds).
    """
    encoder = getattr(model, "encoder", model)
    if hasattr(encoder, "set_attn_implementation"):
        encoder.set_attn_implementation("eager")


def export_fp32(model: Any, path: Path) -> None:
    import torch
    from torch.export import Dim

    use_eager_attention(model)

    batch, tokens, lines = Dim("batch"), Dim("tokens"), Dim("lines")
    by_token = {0: batch, 1: tokens}
    program = torch.onnx.export(
        _graph_module(model), _example_inputs(), dynamo=True, opset_version=OPSET, input_names=INPUT_NAMES,
        output_names=["probs"], external_data=False, verbose=False,
        dynamic_shapes=(by_token, by_token, by_token, by_token, {0: lines}))
    program.save(str(path), external_data=False)


def quantize_int8(fp32_path: Path, int8_path: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # Per-channel int8 weights of the MatMuls (the encoder's compute); activations are quantised per
    # batch at run time, so no calibration data is needed. Gather too: the word embedding is half of
    # MiniLM's weights (30522 x 384), and left in fp32 it keeps the file at 59 MB instead of ~23 MB.
    quantize_dynamic(str(fp32_path), str(int8_path), weight_type=QuantType.QInt8, per_channel=True,
                     op_types_to_quantize=["MatMul", "Gemm", "Gather"])


def export_checkpoint(checkpoint: str | Path, out_dir: str | Path, *, int8: bool = True,
                      fp32: bool = True) -> dict[str, Any]:
    """Write an ONNX encoder directory from a squeez encoder checkpoint (atomically: a temp dir renamed
    into place). Returns what was written, with sizes."""
    import torch

    from squeez_ray.infer.encoder.model import ENCODER_CONFIG, load_scorer
    from squeez_ray.infer.encoder.tokens import line_tokenizer

    checkpoint, out = Path(checkpoint), Path(out_dir)
    if not (checkpoint / ENCODER_CONFIG).exists():
        raise ValueError(f"{checkpoint} is not a trained squeez encoder checkpoint (no {ENCODER_CONFIG})")
    model, tokenizer, settings = load_scorer(checkpoint)
    model.float().eval()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        with torch.inference_mode(False), torch.no_grad():
            export_fp32(model, staging / ONNX_FP32)
        if int8:
            quantize_int8(staging / ONNX_FP32, staging / ONNX_INT8)
        if not fp32:
            (staging / ONNX_FP32).unlink()
        tokenizer.backend_tokenizer.save(str(staging / TOKENIZER_FILE))
        settings.special_ids = line_tokenizer(tokenizer).special_ids()
        (staging / ENCODER_CONFIG).write_text(json.dumps(settings.to_json(), indent=2) + "\n")
        if (checkpoint / "manifest.json").exists():
            shutil.copy2(checkpoint / "manifest.json", staging / "manifest.json")
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {"checkpoint": str(checkpoint), "out": str(out),
            "files": {p.name: p.stat().st_size for p in sorted(out.iterdir()) if p.is_file()}}


def export_into_checkpoint(checkpoint: str | Path) -> dict[str, Any]:
    """Add model.onnx / model.int8.onnx (+ tokenizer.json, special ids) to a checkpoint directory in
    place, so the ``encoder`` backend runs it on ONNX Runtime (what training does at its end)."""
    checkpoint = Path(checkpoint)
    with tempfile.TemporaryDirectory(dir=checkpoint.parent) as tmp:
        info = export_checkpoint(checkpoint, Path(tmp) / "onnx")
        for name in (ONNX_FP32, ONNX_INT8, "squeez_encoder.json", TOKENIZER_FILE):
            source = Path(tmp) / "onnx" / name
            if source.exists():
                shutil.copy2(source, checkpoint / f".{name}.tmp")
                (checkpoint / f".{name}.tmp").replace(checkpoint / name)
    return {**info, "out": str(checkpoint)}

