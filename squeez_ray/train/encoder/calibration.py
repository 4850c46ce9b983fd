"""Calibration: where the encoder's threshold sits, chosen on dev scores (never on the evaluation cases).

The threshold math (a recall target, a kept-share target, the best mean F1 under a kept-share cap),
the dev curve and per-tool-type breakdown stored with a checkpoint, and the two jobs that use them:
``calibrate_on_dev`` at the end of training (``recalibrate`` redoes it on a trained checkpoint), and
``calibrate_variant`` for an exported ONNX variant (int8 scores move a little, so it gets its own
threshold; ``set_overlap`` changes the inference windows and drops the thresholds that no longer apply).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from squeez_ray.metrics import line_index_scores
from squeez_ray.infer.encoder.scoring import select_lines
from squeez_ray.infer.encoder.windows import WindowSpec


def calibrate_threshold(scores: Sequence[np.ndarray], labels: Sequence[np.ndarray], target_recall: float) -> dict[str, float]:
    """The highest threshold whose line-level recall over all positive lines is >= ``target_recall``.

    Returns the threshold with the recall, precision and kept share it gives on these examples
    (before gap bridging, which only adds lines).
    """
    if not 0 < target_recall <= 1:
        raise ValueError(f"target_recall must be in (0, 1], got {target_recall}")
    flat_scores = np.concatenate([np.asarray(s, dtype=np.float64) for s in scores]) if scores else np.zeros(0)
    flat_labels = np.concatenate([np.asarray(y, dtype=bool) for y in labels]) if labels else np.zeros(0, bool)
    positives = np.sort(flat_scores[flat_labels])[::-1]
    if positives.size == 0:
        raise ValueError("cannot calibrate: the calibration set has no positive lines")
    k = int(np.ceil(target_recall * positives.size))  # need at least k positives at or above t
    threshold = float(positives[k - 1])
    kept = flat_scores >= threshold
    tp = int((kept & flat_labels).sum())
    return {"threshold": threshold, "target_recall": target_recall, "recall": tp / positives.size,
            "precision": tp / max(int(kept.sum()), 1), "kept_share": float(kept.mean()),
            "positive_lines": int(positives.size), "lines": int(flat_scores.size)}


def threshold_for_kept_share(scores: Sequence[np.ndarray], labels: Sequence[np.ndarray],
                             kept_share: float) -> dict[str, float]:
    """The threshold keeping about ``kept_share`` of all lines (a compression target), with the
    recall and precision it gives on these examples; the alternative to a recall target when the
    deployment's constraint is how much the agent reads."""
    if not 0 < kept_share <= 1:
        raise ValueError(f"kept_share must be in (0, 1], got {kept_share}")
    flat_scores = np.concatenate([np.asarray(s, dtype=np.float64) for s in scores])
    flat_labels = np.concatenate([np.asarray(y, dtype=bool) for y in labels])
    ranked = np.sort(flat_scores)[::-1]
    threshold = float(ranked[max(int(kept_share * ranked.size), 1) - 1])
    kept = flat_scores >= threshold
    tp = int((kept & flat_labels).sum())
    return {"threshold": threshold, "target_kept_share": kept_share, "recall": tp / max(int(flat_labels.sum()), 1),
            "precision": tp / max(int(kept.sum()), 1), "kept_share": float(kept.mean()),
            "positive_lines": int(flat_labels.sum()), "lines": int(flat_scores.size)}


def threshold_for_best_f1(scores: Sequence[np.ndarray], labels: Sequence[np.ndarray], bridge_gap: int,
                          max_kept_share: float = 0.1, candidates: int = 200) -> dict[str, float]:
    """The threshold with the best mean per-example line F1 (as the evaluation scores: both empty is
    1, one empty is 0), among those keeping on average at most ``max_kept_share`` of each output's
    lines. Unlike a pooled recall or kept-share target, this counts every example once (long outputs
    do not decide it) and rewards answering negatives with nothing."""
    if not 0 < max_kept_share <= 1:
        raise ValueError(f"max_kept_share must be in (0, 1], got {max_kept_share}")
    flat = np.concatenate([np.asarray(x, dtype=np.float64) for x in scores])
    grid = np.unique(np.quantile(flat, np.linspace(0.5, 1.0, candidates)))
    gold = [set(np.flatnonzero(np.asarray(y) > 0) + 1) for y in labels]
    best: dict[str, float] | None = None
    for threshold in grid:
        f1s, shares = [], []
        for s, g in zip(scores, gold):
            kept = set(select_lines(np.asarray(s), float(threshold), bridge_gap))
            shares.append(len(kept) / max(len(s), 1))
            f1s.append(line_index_scores(kept, g)[2])
        point = {"threshold": float(threshold), "f1": float(np.mean(f1s)), "mean_kept_share": float(np.mean(shares)),
                 "negatives_empty": float(np.mean([not any(s >= threshold) for s, g in zip(scores, gold) if not g]))
                 if any(not g for g in gold) else float("nan")}
        if point["mean_kept_share"] <= max_kept_share and (best is None or point["f1"] > best["f1"]):
            best = point
    if best is None:
        raise ValueError(f"no threshold keeps at most {max_kept_share} of the lines")
    flat_labels = np.concatenate([np.asarray(y, dtype=bool) for y in labels])
    kept_flat = flat >= best["threshold"]
    tp = int((kept_flat & flat_labels).sum())
    return {**best, "objective": "f1", "max_kept_share": max_kept_share,
            "recall": tp / max(int(flat_labels.sum()), 1), "precision": tp / max(int(kept_flat.sum()), 1),
            "kept_share": float(kept_flat.mean()), "positive_lines": int(flat_labels.sum()), "lines": int(flat.size)}


CURVE_RECALLS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def calibration_curve(scores: Sequence[np.ndarray], labels: Sequence[np.ndarray],
                      recalls: Sequence[float] = CURVE_RECALLS) -> list[dict[str, float]]:
    """The dev trade-off at several recall targets (threshold, precision, kept share), stored in the
    checkpoint so a deployment can pick another operating point (``--threshold``) without rescoring."""
    return [{k: round(v, 4) if isinstance(v, float) else v for k, v in calibrate_threshold(scores, labels, r).items()
             if k in ("threshold", "target_recall", "recall", "precision", "kept_share")} for r in recalls]


def ranking_auc(scores: np.ndarray, labels: np.ndarray) -> float | None:
    """Probability that a random relevant line outscores a random irrelevant one (ties count half);
    None when one class is missing. Threshold-free, so it shows whether the model separates lines
    at all, apart from where the threshold sits."""
    labels = np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if not n_pos or not n_neg:
        return None
    order = np.argsort(scores, kind="stable")
    ranks = np.empty(len(scores), dtype=np.float64)
    ranks[order] = np.arange(1, len(scores) + 1)
    sorted_scores = np.asarray(scores)[order]
    # average ranks over ties
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    for start, count in zip(first, counts):
        if count > 1:
            ranks[order[start:start + count]] = start + (count + 1) / 2
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def breakdown_by_group(scores: Sequence[np.ndarray], labels: Sequence[np.ndarray], groups: Sequence[str],
                       threshold: float) -> dict[str, dict[str, float | int | None]]:
    """Per group (tool type): examples, lines, relevant share, AUC, and the precision / recall /
    kept share the threshold gives. Stored with the calibration so a weak tool family shows on dev,
    without touching the evaluation cases."""
    out: dict[str, dict[str, float | int | None]] = {}
    for group in sorted(set(groups)):
        picked = [i for i, g in enumerate(groups) if g == group]
        s = np.concatenate([np.asarray(scores[i], dtype=np.float64) for i in picked])
        y = np.concatenate([np.asarray(labels[i], dtype=bool) for i in picked])
        kept = s >= threshold
        tp = int((kept & y).sum())
        auc = ranking_auc(s, y)
        out[group] = {"examples": len(picked), "lines": int(s.size), "relevant_share": round(float(y.mean()), 4),
                      "auc": None if auc is None else round(auc, 4),
                      "precision": round(tp / max(int(kept.sum()), 1), 4),
                      "recall": round(tp / max(int(y.sum()), 1), 4), "kept_share": round(float(kept.mean()), 4)}
    return out


def calibrate_on_dev(model: Any, tokenizer: Any, window: WindowSpec, dev_rows: list[dict[str, Any]],
                     target_recall: float, target_kept_share: float | None = None, *, objective: str | None = None,
                     bridge_gap: int = 2) -> dict[str, Any]:
    """Score the dev split once: the threshold for ``target_recall`` (or ``target_kept_share`` when
    set, or the best dev F1 under that kept share for ``objective="f1"``), the whole dev curve, the
    ranking AUC, and the same per tool type."""
    from squeez_ray.infer.encoder.scoring import score_lines
    from squeez_ray.train.encoder.data import line_labels

    scores = score_lines(model, tokenizer, window, [(r["query"], r["tool_output"]) for r in dev_rows])
    labels = [line_labels(len(s), r.get("gold_spans")) for s, r in zip(scores, dev_rows)]
    if objective == "f1":
        point = threshold_for_best_f1(scores, labels, bridge_gap, target_kept_share or 0.1)
    elif target_kept_share:
        point = threshold_for_kept_share(scores, labels, target_kept_share)
    else:
        point = calibrate_threshold(scores, labels, target_recall)
    by_tool_type = breakdown_by_group(scores, labels, [r.get("tool_type") or "unknown" for r in dev_rows],
                                      point["threshold"])
    auc = ranking_auc(np.concatenate(scores), np.concatenate(labels) > 0)
    return {**point, "auc": auc, "curve": calibration_curve(scores, labels), "by_tool_type": by_tool_type}


def recalibrate(model_dir: str | Path, dev_data: str, target_recall: float,
                target_kept_share: float | None = None, objective: str | None = None) -> dict[str, Any]:
    """Move a trained checkpoint's threshold to another dev recall target (no retraining).

    Rewrites ``squeez_encoder.json`` atomically and records the change in ``manifest.json``.
    """
    from squeez_ray.infer.encoder.model import ENCODER_CONFIG, load_scorer
    from squeez_ray.io_utils import write_json_atomic
    from squeez_ray.schema import read_examples

    model_dir = Path(model_dir)
    model, tokenizer, settings = load_scorer(model_dir)
    if not (model_dir / ENCODER_CONFIG).exists():
        raise ValueError(f"{model_dir} is a bare encoder, not a trained squeez encoder checkpoint")
    calibration = calibrate_on_dev(model, tokenizer, settings.window, read_examples(dev_data), target_recall,
                                   target_kept_share, objective=objective, bridge_gap=settings.bridge_gap)
    previous = settings.threshold
    settings.threshold, settings.calibration = calibration["threshold"], calibration
    write_json_atomic(model_dir / ENCODER_CONFIG, settings.to_json())
    manifest_path = model_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest.setdefault("recalibrations", []).append({"dev_data": dev_data, "target_recall": target_recall,
                                                      "target_kept_share": target_kept_share, "objective": objective,
                                                      "previous_threshold": previous, "calibration": calibration})
    manifest["calibration"] = calibration
    write_json_atomic(manifest_path, manifest)
    return calibration


def set_overlap(export_dir: str | Path, overlap_lines: int) -> dict[str, Any]:
    """Score with ``overlap_lines`` lines shared by consecutive windows instead of the training value.

    Overlap is an inference choice (each line is scored in every window holding it, and keeps its
    best score), so it trades edge context for speed: 4 -> 2 lines scores ~15% fewer tokens. The
    thresholds calibrated under the old windows no longer apply, so the caller recalibrates every
    variant on dev afterwards (``calibrate_variant``); the old ones are dropped here, never kept stale.
    """
    from squeez_ray.infer.encoder.model import ENCODER_CONFIG, EncoderSettings
    from squeez_ray.io_utils import write_json_atomic

    if overlap_lines < 0:
        raise ValueError(f"overlap_lines must be >= 0, got {overlap_lines}")
    settings_path = Path(export_dir) / ENCODER_CONFIG
    settings = EncoderSettings.from_json(json.loads(settings_path.read_text()))
    trained = settings.window.overlap_lines
    settings.window = replace(settings.window, overlap_lines=overlap_lines)
    settings.variant_thresholds = {}
    settings.operating_points = {}  # measured under the old windows too
    settings.calibration = {**settings.calibration, "trained_overlap_lines": trained}
    written = settings.to_json()
    write_json_atomic(settings_path, written)
    return written["window"]


def calibrate_variant(model_dir: str | Path, dev_rows: Sequence[Mapping[str, Any]], variant: str = "int8"
                      ) -> dict[str, Any]:
    """Calibrate ``variant``'s own threshold on the dev rows, the way training calibrated fp32.

    Quantised weights move every score a little, and the fp32 threshold then keeps a different set of
    lines; re-running the checkpoint's calibration (same objective and kept-share cap) on the variant's
    own scores puts it back on the operating point dev chose. Written to ``squeez_encoder.json``'s
    ``variant_thresholds`` with the variant's dev recall curve (``operating_points``), atomically;
    returns the calibration point.
    """
    from squeez_ray.infer.encoder.model import ENCODER_CONFIG, EncoderSettings
    from squeez_ray.infer.encoder.onnx_runtime import OnnxEncoderPruner
    from squeez_ray.io_utils import write_json_atomic
    from squeez_ray.train.encoder.data import line_labels
    from squeez_ray.train.encoder.operating_curve import operating_curve

    model_dir = Path(model_dir)
    if not dev_rows:
        raise ValueError("cannot calibrate on an empty dev set")
    pruner = OnnxEncoderPruner(model_dir, dtype=variant)
    scores = pruner.score([(str(r["query"]), str(r["tool_output"])) for r in dev_rows])
    labels = [line_labels(len(s), r.get("gold_spans")) for s, r in zip(scores, dev_rows)]
    settings_path = model_dir / ENCODER_CONFIG
    settings = EncoderSettings.from_json(json.loads(settings_path.read_text()))
    reference = settings.calibration
    if reference.get("objective") == "f1":
        point = threshold_for_best_f1(scores, labels, settings.bridge_gap, reference.get("max_kept_share") or 0.1)
    elif reference.get("target_kept_share"):
        point = threshold_for_kept_share(scores, labels, reference["target_kept_share"])
    else:
        point = calibrate_threshold(scores, labels, reference.get("target_recall") or 0.8)
    point["auc"] = ranking_auc(np.concatenate(scores), np.concatenate(labels) > 0)
    settings.variant_thresholds[variant] = point["threshold"]
    # The same dev scores give the variant's recall curve (--recall-target), at no second scoring pass.
    settings.operating_points[pruner.variant] = operating_curve(scores, labels, settings.bridge_gap)
    write_json_atomic(settings_path, settings.to_json())
    return point
