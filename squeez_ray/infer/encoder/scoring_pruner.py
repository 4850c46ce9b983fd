"""What both encoder runtimes share: which lines the encoder reads, how scores become kept lines.

``EncoderPruner`` (torch, ``encoder_pruner.py``) and ``OnnxEncoderPruner`` (``encoder_onnx.py``) only supply
the forward pass (``_forward``); everything else is here, once. Two decoders:

- **blocks** (a model whose ``squeez_encoder.json`` carries ``block_decoder``; the shipped default): the
  output is cut into evidence blocks (``evidence_blocks``), a cheap lexical/structural tier picks the
  blocks the encoder reads within ``shortlist_tokens`` (``block_shortlist``), the encoder scores only
  those lines, the fusion weighs them, and whole or trimmed blocks are kept by score (``block_decoder``);
- **lines** (every model before): every line scored, a per-line threshold, gap bridging.
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
from squeez_ray.infer.budget import current as current_budget
from squeez_ray.infer.budget import out_of_time, over_budget_note
from squeez_ray.spans import spans_from_line_numbers


def _scored_rows(n_lines: int, subset: np.ndarray | None, skip: np.ndarray) -> np.ndarray:
    """The lines to fuse after a time-budget cut: those asked for (``subset``, else all) and scored."""
    asked = np.zeros(n_lines, dtype=bool)
    asked[np.arange(n_lines) if subset is None else subset] = True
    return np.flatnonzero(asked & ~skip)


class ScoringPruner(Pruner):
    """Scores -> kept lines (threshold, gap bridging, kept-lines budget) -> results; subclasses supply
    ``encoder_scores`` and call ``choose_operating_point`` once their settings are loaded."""

    name = "encoder"
    threshold = 0.5
    settings = None
    curve: list = []  # the variant's dev operating curve (recall target -> threshold)
    max_kept_lines: int | None = None
    fusion = None  # the model's learned lexical/block stage (infer/encoder/fusion.py), if it ships one
    block_decoder = None  # BlockDecoder when the model decides evidence blocks (see the module docstring)
    shortlist_tokens: int | None = None  # line tokens the encoder reads per output (None: every line), either decoder
    negative_gate = None  # NegativeGate in force (infer/encoder/negative_gate.py): the default point only
    _gate_allowed = True  # engine_kwargs negative_gate: false turns the model's gate off
    tokens_per_batch = 8192
    tokenizer = None
    _forward = None  # the runtime's forward pass (encoder_scoring.Forward)

    def choose_decoder(self, engine_kwargs: dict | None = None) -> None:
        """The decoder in force: the model's ``block_decoder`` unless ``engine_kwargs`` say ``decoder: lines``;
        the shortlist budget: the model's ``shortlist_tokens`` unless ``engine_kwargs`` give one (0: score
        every line). Either decoder can read a shortlist."""
        from squeez_ray.infer.blocks.decoder import BlockDecoder

        options = dict(engine_kwargs or {})
        decoder = options.get("decoder", "blocks" if self.settings.block_decoder else "lines")
        if decoder not in ("blocks", "lines"):
            raise ValueError(f"engine_kwargs.decoder must be blocks or lines, not {decoder!r}")
        if decoder == "blocks" and not self.settings.block_decoder:
            raise ValueError("this encoder has no fitted block decoder (squeez_encoder.json block_decoder): "
                             "fit one with jobs/fit_block_decoder.py, or use decoder: lines")
        self.block_decoder = BlockDecoder.from_json(self.settings.block_decoder) if decoder == "blocks" else None
        budget = options.get("shortlist_tokens", self.settings.shortlist_tokens)
        if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 0):
            raise ValueError(f"engine_kwargs.shortlist_tokens must be a whole number >= 0, not {budget!r}")
        self.shortlist_tokens = budget or None
        gate = options.get("negative_gate", True)
        if not isinstance(gate, bool):
            raise ValueError(f"engine_kwargs.negative_gate must be true or false, not {gate!r}")
        self._gate_allowed = gate

    def choose_operating_point(self, variant: str, *, threshold: float | None, recall_target: float | None,
                               max_kept_lines: int | None) -> None:
        """The threshold in force: an explicit one, else the dev curve's point for ``recall_target``, else
        the checkpoint's default recall target, else the variant's own dev calibration."""
        from squeez_ray.infer.encoder.operating_points import check_knobs, threshold_for_recall

        check_knobs(recall_target, max_kept_lines)
        if threshold is not None and recall_target is not None:
            raise ValueError("give a threshold or a recall target, not both")
        if self.block_decoder is not None:  # the block decoder's own dev curve and default point
            variant = f"{variant}+blocks"
        elif self.shortlist_tokens and f"{variant}+shortlist" in self.settings.operating_points:
            variant = f"{variant}+shortlist"  # per-line decisions over shortlisted scores: their own curve
        self.curve = list(self.settings.operating_points.get(variant, []))
        self.max_kept_lines = max_kept_lines
        default_target = self.settings.default_recall_target
        if self.block_decoder is not None:
            default_target = self.settings.block_decoder.get("default_recall_target", default_target)
        target = recall_target if recall_target is not None else default_target
        # The gate was fitted and chosen at the per-line default point; a caller who moves the point (a
        # threshold, a recall target) asked for more or fewer lines, not for the gate's trade.
        self.negative_gate = None
        if (self.settings.negative_gate and self._gate_allowed and self.block_decoder is None
                and threshold is None and recall_target is None):
            from squeez_ray.infer.encoder.negative_gate import NegativeGate

            self.negative_gate = NegativeGate.from_json(self.settings.negative_gate)
        if threshold is not None:
            self.threshold = threshold
        elif target is not None and (recall_target is not None or self.curve):
            self.threshold = threshold_for_recall(self.curve, target)
        else:
            self.threshold = self.settings.variant_thresholds.get(variant, self.settings.threshold)

    def encoder_scores(self, pairs: Sequence[tuple[str, str]], missed: list[np.ndarray] | None = None
                       ) -> list[np.ndarray]:
        """The encoder's own keep-probabilities of every line, before any fusion (``missed``: see
        score_encoded; only a time budget leaves lines unscored here)."""
        from squeez_ray.infer.encoder.scoring import score_windows

        return score_windows(self._forward, self.tokenizer, self.settings.window, pairs,
                             tokens_per_batch=self.tokens_per_batch, missed=missed)

    def score(self, pairs: Sequence[tuple[str, str]], missed: list[np.ndarray] | None = None) -> list[np.ndarray]:
        """The scores the operating point applies to: the encoder's, through the model's fusion if it has one
        (a line the time budget left unscored is not fused: it stays ``UNSCORED``)."""
        left: list[np.ndarray] = []
        raw = self.encoder_scores(pairs, left)
        if missed is not None:
            missed.extend(left)
        if self.fusion is None:
            return raw
        return [r if skip.all() else self.fusion.fuse(query, output, r, rows=np.flatnonzero(~skip) if skip.any() else None)
                for (query, output), r, skip in zip(pairs, raw, left)]

    def block_scores(self, pairs: Sequence[tuple[str, str]], missed: list[np.ndarray] | None = None,
                     terms_out: list | None = None) -> list[tuple[np.ndarray, list[tuple[int, int]]]]:
        """Per pair: fused scores (lines the shortlist or the time budget left out scored as ``UNSCORED``)
        and evidence blocks; ``missed``: see score_encoded; ``terms_out``: receives each output's per-line
        terms (None where it was not read), for the negative gate to reuse."""
        from squeez_ray.infer.blocks.shortlist import shortlist
        from squeez_ray.infer.encoder.fusion_features import line_terms_of
        from squeez_ray.infer.encoder.scoring import encode_output, score_encoded
        from squeez_ray.infer.blocks.evidence import block_spans

        spec = self.settings.window
        encoded, spans, terms, dropped = [], [], [], []
        for query, output in pairs:
            lines = output.split("\n")
            blocks = block_spans(lines)
            if out_of_time():  # no time left to read this output (a 20,000-line log takes seconds): none scored
                dropped.append(len(encoded))
                encoded.append(([], [[] for _ in lines], np.empty(0, dtype=np.int64)))
                spans.append(blocks)
                terms.append(None)
                continue
            line_terms = line_terms_of(lines)  # once: the shortlist and the fusion both read them
            query_ids, line_ids = encode_output(self.tokenizer, query, lines, spec)
            subset = (shortlist(query, lines, blocks, [len(ids) for ids in line_ids], self.shortlist_tokens,
                                line_terms) if self.shortlist_tokens else None)
            encoded.append((query_ids, line_ids, subset))
            spans.append(blocks)
            terms.append(line_terms)
        left: list[np.ndarray] = []
        raw = score_encoded(self._forward, self.tokenizer, spec, encoded, tokens_per_batch=self.tokens_per_batch,
                            missed=left)
        for i in dropped:
            left[i][:] = True
        if missed is not None:
            missed.extend(left)
        if terms_out is not None:
            terms_out.extend(terms)
        if self.fusion is None:
            return list(zip(raw, spans))
        fused = [r if skip.all() else
                 self.fusion.fuse(query, output, r, t, rows=_scored_rows(len(r), subset, skip) if skip.any() else subset)
                 for (query, output), r, t, (_, _, subset), skip in zip(pairs, raw, terms, encoded, left)]
        return list(zip(fused, spans))

    def kept_lines(self, scores: np.ndarray, blocks, threshold: float) -> list[int]:
        from squeez_ray.infer.blocks.decoder import decide_blocks
        from squeez_ray.infer.encoder.scoring import select_lines

        if self.block_decoder is None:
            return select_lines(scores, threshold, self.settings.bridge_gap)
        return decide_blocks(scores, blocks, threshold, self.block_decoder)

    def _prune_batch(self, requests: Sequence[PruneRequest], render_options: RenderOptions) -> list[PruneResult]:
        from squeez_ray.infer.encoder.operating_points import cap_kept_lines, check_knobs, threshold_for_recall

        started = time.perf_counter()
        pairs = [(r.query, r.tool_output) for r in requests]
        missed: list[np.ndarray] = []
        line_terms: list = []  # per output, when block_scores read them (the gate reuses them)
        if self.block_decoder is not None or self.shortlist_tokens:
            scored = self.block_scores(pairs, missed, line_terms)
        else:  # every line scored, per-line decisions: how every model before block-first pruned
            scored = [(s, None) for s in self.score(pairs, missed)]
        line_terms += [None] * (len(pairs) - len(line_terms))
        budget = current_budget()
        per_item_ms = (time.perf_counter() - started) * 1000 / max(len(requests), 1)
        results = []
        for request, (scores, blocks), skip, terms in zip(requests, scored, missed, line_terms):
            try:  # a per-request knob this model cannot honour fails that request open, not the batch
                check_knobs(request.recall_target, request.max_kept_lines)
                threshold = (self.threshold if request.recall_target is None
                             else threshold_for_recall(self.curve, request.recall_target, lenient=True))
            except ValueError as error:
                results.append(unpruned_result(request.tool_output, str(error), model=self.name,
                                               latency_ms=per_item_ms))
                continue
            kept = self.kept_lines(scores, blocks, threshold)
            reasons = [] if kept else ["no line scored above the threshold"]
            if (kept and self.negative_gate is not None and request.recall_target is None
                    and self.negative_gate.answers_nothing(request.query, request.tool_output, scores, threshold,
                                                           terms)):
                kept, reasons = [], ["the negative gate judged that the output does not hold the answer"]
            kept = cap_kept_lines(kept, scores, request.max_kept_lines or self.max_kept_lines)
            if budget is not None and skip.any():  # the budget ran out before this output was scored
                reasons.insert(0, over_budget_note(budget.seconds, int(skip.sum()), len(skip)))
            results.append(make_result(request.tool_output, spans_from_line_numbers(kept), model=self.name,
                                       render_options=render_options, latency_ms=per_item_ms,
                                       reason="; ".join(reasons) or None))
        return results
