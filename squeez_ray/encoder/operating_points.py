"""Operating points of an encoder: the dev curve of recall against compression, and picking one.

A line scorer keeps every line at or above a threshold; where that threshold sits decides how much
of what the agent needs survives (recall) and how much it reads (compression). An agent that loses
evidence re-runs the command without squeez, so recall is a knob users must be able to turn:
``--recall-target 0.7`` or a kept-lines budget, in the CLI, the config file and each Serve request.

The curve is measured the way the evaluation scores (``METRICS.md``): per example, gap bridging
applied, recall averaged over the positive examples, compression averaged over all of them. It is
computed once on the dev split and stored in ``squeez_encoder.json`` per runtime variant (int8 scores
shift), so choosing a point at run time costs nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

# The recall targets the stored curve answers; a target between two is served by the next one up.
CURVE_TARGETS = tuple(round(0.3 + 0.05 * i, 2) for i in range(14))  # 0.30 ... 0.95


def operating_curve(scores: Sequence[np.ndarray], labels: Sequence[np.ndarray], bridge_gap: int,
                    targets: Sequence[float] = CURVE_TARGETS, candidates: int = 400) -> list[dict[str, float]]:
    """For each recall target, the highest threshold whose mean per-example recall on these examples
    reaches it, with the precision, F1, compression and share of negatives answered empty it gives.

    Targets no threshold reaches are left out (the curve says how far the model goes).
    """
    from squeez_ray.encoder.scoring import select_lines
    from squeez_ray.evaluate.metrics import line_index_scores

    if not scores:
        raise ValueError("cannot draw an operating curve without examples")
    gold = [set((np.flatnonzero(np.asarray(y) > 0) + 1).tolist()) for y in labels]
    if not any(gold):
        raise ValueError("cannot draw an operating curve: no example has a gold line")
    flat = np.concatenate([np.asarray(s, dtype=np.float64) for s in scores])
    grid = np.unique(np.quantile(flat, np.linspace(0.0, 1.0, candidates)))[::-1]  # strict -> lenient
    points: list[dict[str, float]] = []
    for threshold in grid:
        recalls, precisions, f1s, compressions, negatives_empty = [], [], [], [], []
        for s, g in zip(scores, gold):
            kept = set(select_lines(np.asarray(s), float(threshold), bridge_gap))
            p, r, f = line_index_scores(kept, g)
            f1s.append(f)
            compressions.append(1 - max(len(kept), 1) / max(len(s), 1))
            if g:
                recalls.append(r)
                precisions.append(p)
            else:
                negatives_empty.append(not kept)
        points.append({"threshold": round(float(threshold), 6), "recall": float(np.mean(recalls)),
                       "precision": float(np.mean(precisions)), "f1": float(np.mean(f1s)),
                       "compression": float(np.mean(compressions)),
                       "negatives_empty": float(np.mean(negatives_empty)) if negatives_empty else float("nan")})
    curve = []
    for target in targets:
        reached = next((p for p in points if p["recall"] >= target), None)  # the strictest that reaches it
        if reached is not None:
            curve.append({"target_recall": target, **{k: round(v, 4) if k != "threshold" else v
                                                      for k, v in reached.items()}})
    return curve


def threshold_for_recall(curve: Sequence[Mapping[str, Any]], recall_target: float, *, lenient: bool = False
                         ) -> float:
    """The stored threshold that reached ``recall_target`` on dev (the next stored target up when it
    falls between two). Beyond the curve: an error naming what it does reach, or with ``lenient``
    (a per-request knob, where failing the request would cost the agent its output) the curve's most
    lenient point."""
    if not 0 < recall_target <= 1:
        raise ValueError(f"recall_target must be in (0, 1], got {recall_target}")
    if not curve:
        raise ValueError("this encoder has no dev operating curve (squeez_encoder.json 'operating_points'): "
                         "calibrate it with jobs/calibrate_encoder.py, or set a threshold instead")
    for point in sorted(curve, key=lambda p: p["target_recall"]):
        if point["target_recall"] >= recall_target - 1e-9:
            return float(point["threshold"])
    best = max(curve, key=lambda p: p["recall"])
    if lenient:
        return float(best["threshold"])
    raise ValueError(f"recall_target {recall_target} is beyond this encoder's dev curve "
                     f"(it reaches recall {best['recall']:.2f} at compression {best['compression']:.2f})")


def cap_kept_lines(kept: Sequence[int], scores: np.ndarray, max_kept_lines: int | None) -> list[int]:
    """At most ``max_kept_lines`` of the kept (1-based) lines: the highest-scoring ones, in source order."""
    if not max_kept_lines or len(kept) <= max_kept_lines:
        return list(kept)
    ranked = sorted(kept, key=lambda n: (-float(scores[n - 1]), n))
    return sorted(ranked[:max_kept_lines])


def check_knobs(recall_target: float | None, max_kept_lines: int | None) -> None:
    """One-line errors for knob values no operating point can honour."""
    if recall_target is not None and not 0 < recall_target <= 1:
        raise ValueError(f"recall_target must be in (0, 1], got {recall_target}")
    if max_kept_lines is not None and max_kept_lines < 1:
        raise ValueError(f"max_kept_lines must be at least 1, got {max_kept_lines}")


def calibrate_operating_points(model_dir: str | Path, dev_rows: Sequence[Mapping[str, Any]],
                               variants: Sequence[str], default_recall_target: float | None = None
                               ) -> dict[str, Any]:
    """Score the dev rows with each ONNX variant, store its operating curve in ``squeez_encoder.json``
    (atomically) and, when given, the recall target the default threshold is taken at. Returns what
    was written."""
    from squeez_ray.encoder.data import line_labels
    from squeez_ray.encoder.model import ENCODER_CONFIG, EncoderSettings
    from squeez_ray.encoder.onnx_runtime import OnnxEncoderPruner
    from squeez_ray.io_utils import write_json_atomic

    model_dir = Path(model_dir)
    if not dev_rows:
        raise ValueError("cannot calibrate on an empty dev set")
    settings_path = model_dir / ENCODER_CONFIG
    settings = EncoderSettings.from_json(json.loads(settings_path.read_text()))
    for variant in variants:
        pruner = OnnxEncoderPruner(model_dir, dtype=variant, threshold=0.5)
        scores = pruner.score([(str(r["query"]), str(r["tool_output"])) for r in dev_rows])
        labels = [line_labels(len(s), r.get("gold_spans")) for s, r in zip(scores, dev_rows)]
        settings.operating_points[pruner.variant] = operating_curve(scores, labels, settings.bridge_gap)
    if default_recall_target is not None:
        for curve in settings.operating_points.values():  # refuse a default some variant cannot reach
            threshold_for_recall(curve, default_recall_target)
        settings.default_recall_target = default_recall_target
    write_json_atomic(settings_path, settings.to_json())
    return {"operating_points": settings.operating_points, "default_recall_target": settings.default_recall_target}
