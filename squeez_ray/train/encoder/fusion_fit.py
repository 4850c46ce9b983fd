"""Fit the fusion combiner (``infer/encoder/fusion``) on cached encoder scores, and measure it on dev.

Train rows give the fit (a logistic regression by Newton's method, numpy only, each example weighted
equally so one 3,000-line log does not outvote a hundred short outputs); the dev rows give model
selection (which feature set, which L2) and the threshold curve. The evaluation cases are never read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from squeez_ray.infer.encoder.fusion import FusionModel
from squeez_ray.infer.encoder.fusion_features import FEATURES, line_features


def example_matrices(rows: Sequence[Mapping[str, Any]], cache: Mapping[str, np.ndarray]
                     ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], list[Mapping[str, Any]]]:
    """(features, labels, encoder probabilities, rows) of the rows whose scores are cached."""
    from squeez_ray.train.encoder.data import line_labels

    xs, ys, probs, kept = [], [], [], []
    for row in rows:
        scores = cache.get(str(row["instance_id"]))
        if scores is None:
            continue
        lines = str(row["tool_output"]).split("\n")
        if len(scores) != len(lines):  # the id now names another output (a rebuilt split): never fit on it
            raise ValueError(f"cached scores for {row['instance_id']} cover {len(scores)} lines, its output has "
                             f"{len(lines)}: the cache is stale; use a fresh --cache")
        xs.append(line_features(str(row["query"]), lines, scores))
        ys.append(line_labels(len(lines), row.get("gold_spans")))
        probs.append(scores)
        kept.append(row)
    return xs, ys, probs, kept


def fit_logistic(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray], features: Sequence[str], *,
                 l2: float = 1.0, positive_weight: float = 1.0, iterations: int = 30) -> FusionModel:
    """Logistic regression on the named feature columns; every example's lines share weight 1."""
    columns = [FEATURES.index(f) for f in features]
    x = np.concatenate([m[:, columns] for m in xs])
    y = np.concatenate(ys).astype(np.float64)
    w = np.concatenate([np.full(len(m), 1.0 / max(len(m), 1)) for m in xs])
    w = w * np.where(y > 0, positive_weight, 1.0)
    w = w * (len(xs) / w.sum())  # l2 is then relative to the number of examples
    mean, scale = x.mean(0), x.std(0)
    scale[scale < 1e-9] = 1.0
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    beta = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[-1] = 0.0  # no shrinkage of the bias
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(z @ beta)))
        gradient = z.T @ (w * (p - y)) + penalty * beta
        hessian = (z * (w * p * (1 - p))[:, None]).T @ z + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-7:
            break
    return FusionModel(tuple(features), mean, scale, beta[:-1], float(beta[-1]))


# ``monotone=True``: more evidence never lowers a line's score (the trees rise with the encoder's score and
# every lexical and block match, and fall with the line's rank). jobs/fit_fusion.py compares it on dev
# with the unconstrained trees ("trees-monotone"; docs/ENCODER.md, "Fusion").
INCREASING = ("enc_logit", "enc_gap_to_max", "overlap", "bm25_rel", "bm25_log", "exact_hits", "any_exact",
              "block_bm25_rel", "block_is_best", "block_exact", "block_enc_max", "block_enc_gap", "neighbour_enc_max")
DECREASING = ("enc_rank",)


def fit_trees(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray], features: Sequence[str], *,
              max_depth: int = 3, trees: int = 150, learning_rate: float = 0.1, l2: float = 1.0,
              monotone: bool = False):
    """A small gradient-boosted tree ensemble (scikit-learn's histogram GBM; a training-time dependency
    only) exported to the plain arrays ``TreeFusionModel`` walks with numpy. Same example weighting."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    from squeez_ray.infer.encoder.fusion import TreeFusionModel

    columns = [FEATURES.index(f) for f in features]
    x = np.concatenate([m[:, columns] for m in xs])
    y = np.concatenate(ys).astype(int)
    w = np.concatenate([np.full(len(m), len(xs) / max(len(m), 1) / sum(len(v) > 0 for v in xs)) for m in xs])
    constraints = [1 if f in INCREASING else -1 if f in DECREASING else 0 for f in features] if monotone else None
    model = HistGradientBoostingClassifier(max_depth=max_depth, max_iter=trees, learning_rate=learning_rate,
                                           l2_regularization=l2, early_stopping=False, random_state=0,
                                           monotonic_cst=constraints)
    model.fit(x, y, sample_weight=w)
    roots, feature, threshold, left, right, value = [], [], [], [], [], []
    for (predictor,) in model._predictors:  # one predictor per boosting round (binary: one class)
        nodes, offset = predictor.nodes, len(feature)
        roots.append(offset)
        leaf = nodes["is_leaf"].astype(bool)
        index = {k: nodes[k].astype(np.int64) for k in ("feature_idx", "left", "right")}  # stored unsigned
        feature.extend(np.where(leaf, -1, index["feature_idx"]).tolist())
        threshold.extend(nodes["num_threshold"].tolist())
        left.extend(np.where(leaf, -1, index["left"] + offset).tolist())
        right.extend(np.where(leaf, -1, index["right"] + offset).tolist())
        value.extend(np.where(leaf, nodes["value"], 0.0).tolist())
    return TreeFusionModel(tuple(features), float(np.ravel(model._baseline_prediction)[0]), np.array(roots),
                           np.array(feature), np.array(threshold), np.array(left), np.array(right),
                           np.array(value), max_depth + 1), model


def sweep(scores: Sequence[np.ndarray], labels: Sequence[np.ndarray], bridge_gap: int,
          candidates: int = 120) -> list[dict[str, float]]:
    """Per-example recall / precision / F1 / compression / negatives empty at thresholds spanning the
    top fifth of the score range (strict -> lenient), measured as the dev curve measures them."""
    flat = np.concatenate([np.asarray(s, dtype=np.float64) for s in scores])
    grid = np.unique(np.quantile(flat, np.linspace(0.80, 1.0, candidates)))[::-1]
    return points_at(scores, labels, bridge_gap, grid)


def points_at(scores: Sequence[np.ndarray], labels: Sequence[np.ndarray], bridge_gap: int,
              thresholds: Sequence[float]) -> list[dict[str, float]]:
    """The dev measures at each of ``thresholds`` (the operating curve's own measure)."""
    from squeez_ray.train.encoder.operating_curve import gold_lines, measure_at

    gold = gold_lines(labels)
    return [measure_at(scores, gold, float(threshold), bridge_gap) for threshold in thresholds]


def summarize(points: Sequence[Mapping[str, float]], target_recall: float = 0.60) -> dict[str, Any]:
    """The strictest point reaching ``target_recall`` and the best-F1 point (any compression), and
    the best recall at compression >= 0.90 (the issue's aim)."""
    at_target = next((p for p in points if p["recall"] >= target_recall), None)
    best_f1 = max(points, key=lambda p: p["f1"])
    within = [p for p in points if p["compression"] >= 0.90]
    return {"at_recall_target": at_target, "best_f1": best_f1,
            "best_recall_at_compression_0.90": max(within, key=lambda p: p["recall"]) if within else None}

