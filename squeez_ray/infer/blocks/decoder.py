"""Decide evidence blocks, not lines: the block-first pruner's last step (numpy only).

Per output, given each line's keep-probability (the encoder's, through the fusion) and the output's
evidence blocks (``evidence_blocks.block_spans``):

1. a block's score is its best line's;
2. a block is kept when its score reaches the threshold **and** lies within ``max_gap`` logits of the
   output's best block: of twelve look-alike failures the query names one, and the eleven that merely
   resemble it score well below it, so they are dropped instead of each leaving a stray line;
3. at most ``max_blocks`` blocks are kept, best first, and none when the best block scores below
   ``min_best`` (the output does not hold the answer);
4. a kept block is trimmed to the contiguous run from its first to its last line scoring at least
   ``line_ratio`` times the block's score: the signature down to the asked-about body line, the ``E``
   lines down to the ``file:line`` location, without the rest of the page around them.

Blocks are chosen by score, never widened by rule: a block no line of which scores is never kept, and a
kept block keeps only the run its own lines' scores span. The threshold comes from the model's dev
curve for the block decoder (a recall target, as before); the three shape parameters are fitted on dev
by ``train/encoder/block_decoder_fit.py`` and stored in ``squeez_encoder.json`` as ``block_decoder``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


# keys of squeez_encoder.json's ``block_decoder`` that record the fit rather than shape the decision
RECORD_ONLY = {"default_recall_target", "fitted_on"}


@dataclass(frozen=True)
class BlockDecoder:
    line_ratio: float = 0.5  # inside a kept block: lines scoring >= line_ratio x the block's score bound its run
    max_gap: float = 3.0  # logits below the best block beyond which a block is a look-alike, not evidence
    max_blocks: int = 6  # blocks kept at most, best first
    # the output answers nothing unless its best block reaches this (a negative's best look-alike usually
    # scores below a real answer); 0: the threshold alone decides
    min_best: float = 0.0

    def __post_init__(self):
        if not 0.0 < self.line_ratio <= 1.0:
            raise ValueError(f"block_decoder.line_ratio must be in (0, 1], not {self.line_ratio}")
        if self.max_gap <= 0:
            raise ValueError(f"block_decoder.max_gap must be > 0, not {self.max_gap}")
        if self.max_blocks < 1:
            raise ValueError(f"block_decoder.max_blocks must be >= 1, not {self.max_blocks}")
        if not 0.0 <= self.min_best < 1.0:
            raise ValueError(f"block_decoder.min_best must be in [0, 1), not {self.min_best}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BlockDecoder:
        known = {"line_ratio", "max_gap", "max_blocks", "min_best"}
        unknown = sorted(set(data) - known - RECORD_ONLY)
        if unknown:
            raise ValueError(f"block_decoder has unknown keys {unknown}; known: {sorted(known)}")
        return cls(**{k: data[k] for k in known if k in data})


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def decide_blocks(scores: np.ndarray, spans: Sequence[tuple[int, int]], threshold: float,
                  decoder: BlockDecoder) -> list[int]:
    """1-based kept lines of one output: whole-or-trimmed blocks chosen by their scores."""
    if not len(spans):
        return []
    scores = np.asarray(scores, dtype=np.float64)
    block_best = np.array([scores[s:e].max() if e > s else 0.0 for s, e in spans])
    top = float(block_best.max())
    if top < max(threshold, decoder.min_best):
        return []
    floor = _logit(top) - decoder.max_gap
    order = [k for k in np.argsort(-block_best, kind="stable")
             if block_best[k] >= threshold and _logit(float(block_best[k])) >= floor][:decoder.max_blocks]
    kept: list[int] = []
    for k in sorted(order):
        start, end = spans[k]
        inside = np.flatnonzero(scores[start:end] >= decoder.line_ratio * block_best[k])
        kept.extend(range(start + int(inside[0]) + 1, start + int(inside[-1]) + 2))
    return kept
