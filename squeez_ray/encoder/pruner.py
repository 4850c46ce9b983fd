"""The encoder as a backend: ``squeez --backend encoder --model DIR`` and everywhere else a backend goes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from squeez_ray.infer.registry import BackendOptions
from squeez_ray.infer.base import PruneRequest, PruneResult, Pruner, RenderOptions, make_result
from squeez_ray.spans import spans_from_line_numbers


class EncoderPruner(Pruner):
    def __init__(self, model_dir: str | Path, *, device: str | None = None, dtype: str | None = None,
                 threshold: float | None = None, tokens_per_batch: int = 8192, threads: int | None = None):
        import torch

        from squeez_ray.encoder.model import load_scorer

        if threads:
            torch.set_num_threads(threads)
        self.model, self.tokenizer, self.settings = load_scorer(model_dir)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device).eval()
        # bf16 uses the CPU's matrix units where present; "float32" turns it off.
        self.dtype = dtype or "bfloat16"
        self.threshold = self.settings.threshold if threshold is None else threshold
        self.tokens_per_batch = tokens_per_batch
        self.name = f"encoder:{Path(model_dir).name}"

    def _prune_batch(self, requests: Sequence[PruneRequest], render_options: RenderOptions) -> list[PruneResult]:
        from squeez_ray.encoder.scoring import score_lines, select_lines

        started = time.perf_counter()
        all_scores = score_lines(self.model, self.tokenizer, self.settings.window,
                                 [(r.query, r.tool_output) for r in requests],
                                 tokens_per_batch=self.tokens_per_batch, dtype=self.dtype)
        per_item_ms = (time.perf_counter() - started) * 1000 / max(len(requests), 1)
        results = []
        for request, scores in zip(requests, all_scores):
            kept = select_lines(scores, self.threshold, self.settings.bridge_gap)
            results.append(make_result(request.tool_output, spans_from_line_numbers(kept), model=self.name,
                                       render_options=render_options, latency_ms=per_item_ms,
                                       reason=None if kept else "no line scored above the threshold"))
        return results


def build_encoder(options: BackendOptions) -> EncoderPruner:
    if not options.model:
        raise ValueError("the encoder backend needs --model DIR: a checkpoint from jobs/train_encoder.py "
                         "(or set SQUEEZ_MODEL); for a model-free pruner use --backend bm25")
    from squeez_ray.hub import resolve_model

    return EncoderPruner(resolve_model(options.model, what="--model"), device=options.device, dtype=options.dtype, threshold=options.threshold,
                         **{k: v for k, v in options.engine_kwargs.items() if k in ("tokens_per_batch", "threads")})
