"""The dev operating curve of an exported encoder (recall against compression), measured once and stored.

Measured the way the evaluation scores (METRICS.md): per example, gap bridging applied, recall averaged
over the positive examples, compression over all of them. ``jobs/calibrate_encoder.py`` runs it on the
dev split for each ONNX variant and sets the recall the model answers at by default; the run-time side
(picking a threshold from the curve) is ``squeez_ray/infer/encoder/operating_points.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from squeez_ray.infer.encoder.operating_points import threshold_for_recall

# The recall targets the stored curve answers; a target between two is served by the next one up.
CURVE_TARGETS = tuple(round(0.3 + 0.05 * i, 2) for i in range(14))  # 0.30 ... 0.95


def gold_lines(labels: Sequence[np.ndarray]) -> list[set[int]]:
    """Each example's gold as 1-based line numbers (from its per-line 0/1 labels)."""
    return [set((np.flatnonzero(np.asarray(y) > 0) + 1).tolist()) for y in labels]


def measure_at(scores: Sequence[np.ndarray], gold: Sequence[set[int]], threshold: float,
               bridge_gap: int) -> dict[str, float]:
    """Mean per-example recall and precision (examples with gold), F1 and compression (all examples) and the
    share of negatives answered empty, keeping the lines the runtime keeps at ``threshold``."""
    from squeez_ray.metrics import line_index_scores
    from squeez_ray.infer.encoder.scoring import select_lines

    recalls, precisions, f1s, compressions, negatives_empty = [], [], [], [], []
    for s, g in zip(scores, gold):
        kept = set(select_lines(np.asarray(s), threshold, bridge_gap))
        p, r, f = line_index_scores(kept, g)
        f1s.append(f)
        compressions.append(1 - max(len(kept), 1) / max(len(s), 1))
        if g:
            recalls.append(r)
            precisions.append(p)
        else:
            negatives_empty.append(not kept)
    return {"threshold": threshold, "recall": float(np.mean(recalls)), "precision": float(np.mean(precisions)),
            "f1": float(np.mean(f1s)), "compression": float(np.mean(compressions)),
            "negatives_empty": float(np.mean(negatives_empty)) if negatives_empty else float("nan")}


def operating_curve(scores: Sequence[np.ndarray], labels: Sequence[np.ndarray], bridge_gap: int,
                    targets: Sequence[float] = CURVE_TARGETS, candidates: int = 400) -> list[dict[str, float]]:
    """For each recall target, the highest threshold whose mean per-example recall on these examples
    reaches it, with the precision, F1, compression and share of negatives answered empty it gives.

    Targets no threshold reaches are left out (the curve says how far the model goes).
    """
    if not scores:
        raise ValueError("cannot draw an operating curve without examples")
    gold = gold_lines(labels)
    if not any(gold):
        raise ValueError("cannot draw an operating curve: no example has a gold line")
    flat = np.concatenate([np.asarray(s, dtype=np.float64) for s in scores])
    grid = np.unique(np.quantile(flat, np.linspace(0.0, 1.0, candidates)))[::-1]  # strict -> lenient
    points: list[dict[str, float]] = []
    for threshold in grid:
        points.append({**measure_at(scores, gold, float(threshold), bridge_gap), "threshold": round(float(threshold), 6)})
        if points[-1]["recall"] >= max(targets):  # every target reached: more lenient points add nothing
            break
    curve = []
    for target in targets:
        reached = next((p for p in points if p["recall"] >= target), None)  # the strictest that reaches it
        if reached is not None:
            curve.append({"target_recall": target, **{k: round(v, 4) if k != "threshold" else v
                                                      for k, v in reached.items()}})
    return curve


def recall_first_target(curve: Sequence[Mapping[str, Any]], min_compression: float) -> float:
    """The highest recall target whose dev compression is still >= ``min_compression``: how the default
    operating point is chosen for an agent (recall first, within a reading budget)."""
    within = [p for p in curve if p["compression"] >= min_compression]
    if not within:
        raise ValueError(f"no point of the dev curve keeps compression >= {min_compression}")
    return float(max(within, key=lambda p: p["target_recall"])["target_recall"])


def calibrate_operating_points(model_dir: str | Path, dev_rows: Sequence[Mapping[str, Any]] | None,
                               variants: Sequence[str], default_recall_target: float | None = None,
                               min_compression: float | None = None) -> dict[str, Any]:
    """Score the dev rows with each ONNX variant and store its operating curve in ``squeez_encoder.json``
    (atomically; ``dev_rows=None`` keeps the stored curves), then set the recall target the default
    threshold is taken at: ``default_recall_target``, or with ``min_compression`` the highest target
    every variant reaches within that compression. Returns what was written."""
    from squeez_ray.infer.encoder.model import ENCODER_CONFIG, EncoderSettings
    from squeez_ray.infer.encoder.onnx_runtime import OnnxEncoderPruner
    from squeez_ray.io_utils import write_json_atomic
    from squeez_ray.train.encoder.data import line_labels

    model_dir = Path(model_dir)
    settings_path = model_dir / ENCODER_CONFIG
    settings = EncoderSettings.from_json(json.loads(settings_path.read_text()))
    if dev_rows is None and not settings.operating_points:
        raise ValueError(f"{model_dir} has no stored operating curve: give the dev data to measure one")
    if dev_rows is not None and not dev_rows:
        raise ValueError("cannot calibrate on an empty dev set")
    for variant in variants if dev_rows is not None else ():
        pruner = OnnxEncoderPruner(model_dir, dtype=variant, threshold=0.5)
        scores = pruner.score([(str(r["query"]), str(r["tool_output"])) for r in dev_rows])
        labels = [line_labels(len(s), r.get("gold_spans")) for s, r in zip(scores, dev_rows)]
        settings.operating_points[pruner.variant] = operating_curve(scores, labels, settings.bridge_gap)
    if min_compression is not None:
        default_recall_target = min(recall_first_target(curve, min_compression)
                                    for curve in settings.operating_points.values())
    if default_recall_target is not None:
        for curve in settings.operating_points.values():  # refuse a default some variant cannot reach
            threshold_for_recall(curve, default_recall_target)
        settings.default_recall_target = default_recall_target
    write_json_atomic(settings_path, settings.to_json())
    return {"operating_points": settings.operating_points, "default_recall_target": settings.default_recall_target}


def calibrate_model(model_dir: str | Path, dev_data: str | None, default_recall_target: float | None = None,
                    min_compression: float | None = None) -> dict[str, Any]:
    """jobs/calibrate_encoder.py: :func:`calibrate_operating_points` for every ONNX variant in ``model_dir``
    (curves measured on ``dev_data``, else the stored ones kept), and the model card given the same curve."""
    from squeez_ray.infer.encoder.onnx_runtime import ONNX_FP32, ONNX_INT8  # re-exported there, torch-free
    from squeez_ray.io_utils import write_json_atomic
    from squeez_ray.schema import read_examples

    model = Path(model_dir)
    if not (model / "squeez_encoder.json").is_file():
        raise FileNotFoundError(f"{model} is not an exported encoder (no squeez_encoder.json)")
    variants = [v for v, f in (("int8", ONNX_INT8), ("float32", ONNX_FP32)) if (model / f).is_file()]
    if not variants:
        raise FileNotFoundError(f"{model} holds no ONNX model: export it first (jobs/export_encoder.py)")
    dev_rows = read_examples(dev_data) if dev_data else None
    written = calibrate_operating_points(model, dev_rows, variants, default_recall_target, min_compression)
    card_path = model / "model_card.json"
    if card_path.is_file():
        card = json.loads(card_path.read_text())
        measured_on = card.get("operating_points", {}).get("dev_data") if dev_rows is None else {
            "path": dev_data, "examples": len(dev_rows)}
        card["operating_points"] = {"dev_data": measured_on, **written}
        write_json_atomic(card_path, card)
    return written
