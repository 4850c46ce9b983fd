"""Fit and measure the block-first pruner on dev from cached encoder scores (``jobs/fit_block_decoder.py``).

Everything here starts from the encoder's per-line scores over the whole output, cached once
(``encoder_fusion_scores``), so each variant costs seconds, not an encoder pass:

- **per-line** (what shipped before): fused scores, threshold, gap bridging (``select_lines``);
- **blocks**: the same fused scores decided by ``block_decoder.decide_blocks`` over ``evidence_blocks``;
- **shortlist**: the encoder's scores kept only on the lines ``block_shortlist`` picks within a token
  budget (the rest get the floor an unscored line gets at run time), fused, then decided by either rule.

Each variant is swept over thresholds into a recall-compression curve, measured as the evaluation scores
(line-index recall over positives, compression over all, METRICS.md), and compared at equal compression.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from squeez_ray.infer.blocks.decoder import BlockDecoder, decide_blocks
from squeez_ray.infer.blocks.shortlist import shortlist
from squeez_ray.infer.encoder.scoring import UNSCORED, select_lines
from squeez_ray.infer.blocks.evidence import block_spans



@dataclass
class Example:
    query: str
    lines: list[str]
    gold: set[int]  # 1-based
    family: str
    spans: list[tuple[int, int]]
    raw: np.ndarray  # the encoder's own probabilities, every line scored
    line_tokens: list[int]


def examples_from_rows(rows: Sequence[Mapping[str, Any]], cache: Mapping[str, np.ndarray], tokens_of: Callable
                       ) -> list[Example]:
    out = []
    for row in rows:
        scores = cache.get(str(row["instance_id"]))
        if scores is None:
            continue
        lines = row["tool_output"].split("\n")
        gold = {i for span in row["gold_spans"] for i in range(int(span["start_line"]), int(span["end_line"]) + 1)}
        out.append(Example(row["query"], lines, gold, row["tool_type"], block_spans(lines), np.asarray(scores),
                           tokens_of(lines)))
    return out


def shortlisted_raw(example: Example, budget: int | None) -> tuple[np.ndarray, np.ndarray | None]:
    """The encoder scores as the run time sees them with a shortlist of ``budget`` tokens (None: all lines),
    and the lines scored (None: all)."""
    if budget is None:
        return example.raw, None
    chosen = shortlist(example.query, example.lines, example.spans, example.line_tokens, budget)
    if chosen is None:
        return example.raw, None
    raw = np.full(len(example.lines), UNSCORED, dtype=np.float64)
    raw[chosen] = example.raw[chosen]
    return raw, chosen


def fused(examples: Sequence[Example], fusion: Any, budget: int | None) -> list[np.ndarray]:
    """Each example's scores as the runtime fuses them (unscored lines: 0, as ``ScoringPruner.block_scores``)."""
    out = []
    for e in examples:
        raw, rows = shortlisted_raw(e, budget)
        if fusion is None:
            out.append(raw if rows is None else np.where(np.isin(np.arange(len(raw)), rows), raw, 0.0))
        else:
            out.append(np.asarray(fusion.fuse(e.query, "\n".join(e.lines), raw, rows=rows)))
    return out


def measure(examples: Sequence[Example], kept: Sequence[Sequence[int]]) -> dict[str, float]:
    """Line-index recall (positives), precision, F1 (all; both empty = 1), compression, negatives empty."""
    recalls, precisions, f1s, compressions, empties = [], [], [], [], []
    for e, k in zip(examples, kept):
        k = set(k)
        tp = len(k & e.gold)
        if not e.gold or not k:
            f1 = 1.0 if not e.gold and not k else 0.0
        else:
            p, r = tp / len(k), tp / len(e.gold)
            f1 = 2 * p * r / (p + r) if tp else 0.0
        f1s.append(f1)
        compressions.append(1 - max(len(k), 1) / len(e.lines))
        if e.gold:
            recalls.append(tp / len(e.gold))
            precisions.append(tp / len(k) if k else 0.0)
        else:
            empties.append(not k)
    return {"recall": float(np.mean(recalls)), "precision": float(np.mean(precisions)), "f1": float(np.mean(f1s)),
            "compression": float(np.mean(compressions)),
            "negatives_empty": float(np.mean(empties)) if empties else float("nan")}


def per_line_rule(bridge_gap: int):
    return lambda scores, example, threshold: select_lines(scores, threshold, bridge_gap)


def block_rule(decoder: BlockDecoder):
    return lambda scores, example, threshold: decide_blocks(scores, example.spans, threshold, decoder)


def sweep(examples: Sequence[Example], scores: Sequence[np.ndarray], rule, thresholds: Sequence[float]
          ) -> list[dict[str, float]]:
    points = []
    for threshold in thresholds:
        kept = [rule(s, e, threshold) for s, e in zip(scores, examples)]
        points.append({"threshold": float(threshold), **measure(examples, kept)})
    return points


def point_at_compression(examples: Sequence[Example], scores: Sequence[np.ndarray], rule, compression: float,
                         steps: int = 14) -> dict[str, float]:
    """The most lenient threshold whose dev compression is still >= ``compression`` (bisection over the
    scores' quantiles: compression only falls as the threshold is lowered), and what it measures."""
    flat = np.sort(np.concatenate([np.asarray(s, dtype=np.float64) for s in scores]))
    lo, hi = 0.0, 1.0  # quantile positions: hi strict enough, lo too lenient
    best = None
    for _ in range(steps):
        mid = (lo + hi) / 2
        threshold = float(flat[min(int(mid * (len(flat) - 1)), len(flat) - 1)])
        point = {"threshold": threshold,
                 **measure(examples, [rule(s, e, threshold) for s, e in zip(scores, examples)])}
        if point["compression"] >= compression - 1e-9:
            best, hi = point, mid
        else:
            lo = mid
    return best or {"recall": 0.0, "f1": 0.0, "compression": compression, "threshold": float("nan")}


def threshold_grid(scores: Sequence[np.ndarray], n: int = 40) -> np.ndarray:
    flat = np.concatenate([np.asarray(s) for s in scores])
    return np.unique(np.quantile(flat, np.linspace(0.80, 0.9995, n)))[::-1]


DECODER_GRID = {"line_ratio": (0.35, 0.5, 0.7), "max_gap": (2.0, 4.0), "max_blocks": (3, 8), "min_best": (0.0, 0.3)}


def fit_decoder(examples: Sequence[Example], scores: Sequence[np.ndarray], compression: float,
                grid: Mapping[str, Sequence[Any]] = DECODER_GRID) -> tuple[BlockDecoder, list[dict[str, Any]]]:
    """The decoder shape with the most dev recall at ``compression`` (ties: F1), and every shape's point."""
    tried = []
    for values in itertools.product(*grid.values()):
        decoder = BlockDecoder(**dict(zip(grid.keys(), values)))
        point = point_at_compression(examples, scores, block_rule(decoder), compression)
        tried.append({**decoder.to_json(), **point})
    best = max(tried, key=lambda p: (round(p["recall"], 4), p["f1"]))
    return BlockDecoder(**{k: best[k] for k in grid}), tried
