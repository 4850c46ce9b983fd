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
    unpruned_result,
)
from squeez_ray.spans import spans_from_line_numbers


class ScoringPruner(Pruner):
    """Scores -> kept lines (threshold, gap bridging, kept-lines budget) -> results; subclasses supply
    ``encoder_scores`` and call ``choose_operating_point`` once their settings are loaded."""

    name = "encoder"
    threshold = 0.5
    settings = None
    curve: list = []  # the variant's dev operating curve (recall target -> threshold)
    max_kept_lines: int | None = None
    fusion = None  # the model's learned lexical/block stage (infer/encoder_fusion.py), if it ships one

    def choose_operating_point(self, variant: str, *, threshold: float | None, recall_target: float | None,
                               max_kept_lines: int | None) -> None:
        """The threshold in force: an explicit one, else the dev curve's point for ``recall_target``, else
        the checkpoint's default recall target, else the variant's own dev calibration."""
        from squeez_ray.infer.encoder_operating_points import check_knobs, threshold_for_recall

        check_knobs(recall_target, max_kept_lines)
        if threshold is not None and recall_target is not None:
            raise ValueError("give a threshold or a recall target, not both")
        self.curve = list(self.settings.operating_points.get(variant, []))
        self.max_kept_lines = max_kept_lines
        target = recall_target if recall_target is not None else self.settings.default_recall_target
        if threshold is not None:
            self.threshold = threshold
        elif target is not None and (recall_target is not None or self.curve):
            self.threshold = threshold_for_recall(self.curve, target)
        else:
            self.threshold = self.settings.variant_thresholds.get(variant, self.settings.threshold)

    def encoder_scores(self, pairs: Sequence[tuple[str, str]]) -> list[np.ndarray]:
        """The encoder's own keep-probabilities, before any fusion."""
        raise NotImplementedError

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[np.ndarray]:
        """The scores the operating point applies to: the encoder's, through the model's fusion if it has one."""
        from squeez_ray.infer.encoder_fusion import fuse_all

        return fuse_all(self.fusion, pairs, self.encoder_scores(pairs))

    def _prune_batch(self, requests: Sequence[PruneRequest], render_options: RenderOptions) -> list[PruneResult]:
        from squeez_ray.infer.encoder_operating_points import cap_kept_lines, check_knobs, threshold_for_recall
        from squeez_ray.infer.encoder_scoring import select_lines

        started = time.perf_counter()
        all_scores = self.score([(r.query, r.tool_output) for r in requests])
        per_item_ms = (time.perf_counter() - started) * 1000 / max(len(requests), 1)
        results = []
        for request, scores in zip(requests, all_scores):
            try:  # a per-request knob this model cannot honour fails that request open, not the batch
                check_knobs(request.recall_target, request.max_kept_lines)
                threshold = (self.threshold if request.recall_target is None
                             else threshold_for_recall(self.curve, request.recall_target, lenient=True))
            except ValueError as error:
                results.append(unpruned_result(request.tool_output, str(error), model=self.name,
                                               latency_ms=per_item_ms))
                continue
            kept = select_lines(scores, threshold, self.settings.bridge_gap)
            kept = cap_kept_lines(kept, scores, request.max_kept_lines or self.max_kept_lines)
            results.append(make_result(request.tool_output, spans_from_line_numbers(kept), model=self.name,
                                       render_options=render_options, latency_ms=per_item_ms,
                                       reason=None if kept else "no line scored above the threshold"))
        return results
