"""The encoder on ONNX Runtime: onnxruntime + ``tokenizers`` + numpy, no torch, no transformers.

Windowing, scoring over windows, the calibrated threshold and gap bridging are the torch pruner's
own functions (``encoder_windows``, ``encoder_scoring``, ``encoder_tokens``); only the forward pass differs. Starting this
pruner costs the ONNX session (~0.2 s for MiniLM-L6 int8) instead of ~8 s of torch + transformers
imports, which is what makes ``squeez`` usable once per command in an agent loop.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from squeez_ray.infer.encoder.fusion import load_fusion
from squeez_ray.infer.encoder.model import ENCODER_CONFIG, EncoderSettings
from squeez_ray.infer.encoder.scoring import Forward
from squeez_ray.infer.encoder.scoring_pruner import ScoringPruner
from squeez_ray.infer.encoder.tokens import LineTokenizer

# the files an exported model folder holds (``train/encoder/export`` writes them)
ONNX_FP32 = "model.onnx"
ONNX_INT8 = "model.int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
FP32_NAMES = ("float32", "fp32")


def has_onnx(model_dir: str | Path) -> bool:
    directory = Path(model_dir)
    return (directory / ONNX_INT8).is_file() or (directory / ONNX_FP32).is_file()


def onnx_file(model_dir: Path, dtype: str | None) -> Path:
    """int8 when present (the shipped default), fp32 when asked for (``dtype: float32``) or alone."""
    int8, fp32 = model_dir / ONNX_INT8, model_dir / ONNX_FP32
    if dtype in FP32_NAMES or dtype is None and not int8.is_file():
        if fp32.is_file():
            return fp32
        raise FileNotFoundError(f"{model_dir} has no {ONNX_FP32} (dtype {dtype or 'default'})")
    if dtype not in (None, "int8"):
        raise ValueError(f"the ONNX encoder runs int8 or float32, not dtype={dtype!r}")
    if int8.is_file():
        return int8
    raise FileNotFoundError(f"{model_dir} has no {ONNX_INT8}")


def load_onnx_encoder(model_dir: str | Path, *, dtype: str | None = None, threads: int | None = None):
    """(session, LineTokenizer, settings) from an exported encoder directory."""
    from squeez_ray.infer.ort_import import import_onnxruntime

    ort = import_onnxruntime()  # not a plain import: a long command line crashes it (ort_import.py)
    directory = Path(model_dir)
    settings_path = directory / ENCODER_CONFIG
    if not settings_path.is_file():
        raise FileNotFoundError(f"{directory} holds no {ENCODER_CONFIG}: not a squeez encoder directory")
    settings = EncoderSettings.from_json(json.loads(settings_path.read_text()))
    if not settings.special_ids:
        raise ValueError(f"{settings_path} records no special_ids: re-export it with jobs/export_encoder.py")
    tokenizer = LineTokenizer.from_file(directory / TOKENIZER_FILE, settings.special_ids)
    # Chosen by measurement (tests/bench/bench_ort_options.py, 2 cores at load ~16, medians of 3, interleaved):
    # the pool's default threads + ORT_ENABLE_ALL + sequential execution was the fastest or tied on both the
    # shipped shortlist path (1,000 lines: 5 windows) and every line of 300 lines (14 windows); EXTENDED /
    # BASIC graphs 1.16-1.56x slower, 1 or 2 explicit threads 1.03-1.96x, ORT_PARALLEL 1.54-1.57x; its
    # session build (0.09 s) was among the cheapest.
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    threads = threads or int(os.environ.get("SQUEEZ_ENCODER_THREADS", "0") or 0)
    if threads:
        options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle pool threads sleep instead of spinning: `squeez` runs beside an agent, its tools and other
    # replicas, and spinning threads there steal the cores the next forward pass needs.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(str(onnx_file(directory, dtype)), options, providers=["CPUExecutionProvider"])
    return session, tokenizer, settings


def onnx_forward(session) -> Forward:
    def forward(ids, mask, types, owner, n_lines):
        return session.run(["probs"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": types,
                                       "line_of_token": owner, "lines": np.arange(n_lines, dtype=np.int64)})[0]

    return forward


# One window per forward pass on ONNX Runtime. The int8 graph quantises activations per tensor at run
# time, so windows batched together (and their padding) shifted each other's scores by up to 0.26 and
# made a line's fate depend on what else was in the batch (bulk public F1 0.207 vs 0.245 alone). A
# 512-token window is already a large enough matrix for 2 cores: one window at a time was also faster
# for int8 (300 lines 0.95 vs 1.11 s) and fp32 (1.73 vs 1.93 s), since the batch x heads x tokens x
# tokens attention scores stop spilling out of cache. fp32 may still batch when asked to.
ONE_WINDOW = 1


class OnnxEncoderPruner(ScoringPruner):
    def __init__(self, model_dir: str | Path, *, dtype: str | None = None, threshold: float | None = None,
                 tokens_per_batch: int | None = None, threads: int | None = None, name: str | None = None,
                 recall_target: float | None = None, max_kept_lines: int | None = None,
                 engine_kwargs: dict | None = None):
        self.session, self.tokenizer, self.settings = load_onnx_encoder(model_dir, dtype=dtype, threads=threads)
        self._forward = onnx_forward(self.session)
        self.fusion = load_fusion(model_dir, self.settings.fusion)  # None for a model without one
        self.variant = "int8" if onnx_file(Path(model_dir), dtype).name == ONNX_INT8 else "fp32"
        self.choose_decoder(engine_kwargs)
        self.choose_operating_point(self.variant, threshold=threshold, recall_target=recall_target,
                                    max_kept_lines=max_kept_lines)
        # int8 never batches windows: a request's lines must not depend on its neighbours in a batch
        self.tokens_per_batch = ONE_WINDOW if self.variant == "int8" or not tokens_per_batch else tokens_per_batch
        self.name = name or f"encoder:{Path(model_dir).name}"
