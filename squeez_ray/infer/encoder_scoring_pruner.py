"""What both encoder runtimes share once lines have scores: threshold, gap bridging, verbatim results.

``EncoderPruner`` (torch, ``pruner.py``) and ``OnnxEncoderPruner`` (``onnx_runtime.py``) only supply
``score``; everything after it is here, once.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from squeez_ray.infer.base import (
    Pruner,
    PruneRequest,
    PruneResult,
    RenderOptions,
    make_result,
)
from squeez_ray.spans import spans_from_line_numbers


class ScoringPruner(Pruner):
    """Scores -> kept lines (threshold, gap bridging) -> results; subclasses supply ``score``."""

    name = "encoder"
    threshold = 0.5
    settings = None

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[np.ndarray]:
        raise NotImplementedError

    def _prune_batch(self, requests: Sequence[PruneRequest], render_options: RenderOptions) -> list[PruneResult]:
        from squeez_ray.infer.encoder_scoring import select_lines

        started = time.perf_counter()
        all_scores = self.score([(r.query, r.tool_output) for r in requests])
        per_item_ms = (time.perf_counter() - started) * 1000 / max(len(requests), 1)
        results = []
        for request, scores in zip(requests, all_scores):
            kept = select_lines(scores, self.threshold, self.settings.bridge_gap)
            results.append(make_result(request.tool_output, spans_from_line_numbers(kept), model=self.name,
                                       render_options=render_options, latency_ms=per_item_ms,
                                       reason=None if kept else "no line scored above the threshold"))
        return results
