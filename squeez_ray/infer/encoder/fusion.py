"""The learned fusion of encoder, lexical and block evidence, applied after encoder scoring (numpy only).

A model directory may hold ``fusion.json`` (written by ``squeez_ray/train/encoder/fusion_fit.py``): a
logistic regression over ``encoder_fusion_features.FEATURES`` (standardised) or a small gradient-boosted
tree ensemble stored as plain node arrays (``TreeFusionModel``), named in
``squeez_encoder.json`` as ``fusion: {"file", "version", "features"}``. When present, the runtime turns
each output's encoder probabilities into fused probabilities, and every threshold, recall curve and
kept-lines budget of that directory is about the fused scores. A directory without it (every model
exported before) scores exactly as before.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from squeez_ray.infer.encoder.fusion_features import (
    FEATURES,
    FEATURES_VERSION,
    line_features,
)

FUSION_FILE = "fusion.json"


def _check_features(features: Sequence[str]) -> None:
    unknown = [f for f in features if f not in FEATURES]
    if unknown:
        raise ValueError(f"fusion model uses features this runtime does not compute: {unknown}")


@dataclass(frozen=True)
class FusionModel:
    """``p = sigmoid(((x[:, columns] - mean) / scale) @ weights + bias)``."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float

    def __post_init__(self):
        _check_features(self.features)
        sizes = {len(self.features), len(self.mean), len(self.scale), len(self.weights)}
        if len(sizes) != 1:
            raise ValueError("fusion model arrays disagree in length with its feature list")

    @property
    def columns(self) -> list[int]:
        return [FEATURES.index(f) for f in self.features]

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        x = (features[:, self.columns] - self.mean) / self.scale
        return 1.0 / (1.0 + np.exp(-(x @ self.weights + self.bias)))

    def fuse(self, query: str, tool_output: str, encoder_probs: np.ndarray, line_terms=None,
             rows: np.ndarray | None = None) -> np.ndarray:
        """Fused keep-probabilities (float32) of one output's lines (``line_terms``: see ``line_features``).
        With ``rows`` (the lines the encoder scored) only those are fused and the rest get 0: the features
        still see the whole output, but a 20,000-line log does not walk every tree for lines never scored."""
        lines = tool_output.split("\n")
        if len(lines) != len(encoder_probs):
            raise ValueError(f"{len(encoder_probs)} encoder scores for {len(lines)} lines")
        features = line_features(query, lines, encoder_probs, line_terms, scored=rows)
        if rows is None:
            return self.probabilities(features).astype(np.float32)
        fused = np.zeros(len(lines), dtype=np.float32)
        fused[rows] = self.probabilities(features[rows])
        return fused

    def to_json(self) -> dict[str, Any]:
        return {"kind": "logistic", "version": FEATURES_VERSION, "features": list(self.features),
                "mean": self.mean.tolist(), "scale": self.scale.tolist(), "weights": self.weights.tolist(),
                "bias": float(self.bias)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FusionModel:
        if data.get("kind") != "logistic":
            raise ValueError(f"unknown fusion model kind {data.get('kind')!r}")
        if data.get("version") != FEATURES_VERSION:
            raise ValueError(f"fusion model computed with feature version {data.get('version')}, "
                             f"this runtime computes version {FEATURES_VERSION}: re-fit it")
        return cls(tuple(data["features"]), np.asarray(data["mean"], dtype=np.float64),
                   np.asarray(data["scale"], dtype=np.float64), np.asarray(data["weights"], dtype=np.float64),
                   float(data["bias"]))


@dataclass(frozen=True)
class TreeFusionModel:
    """Gradient-boosted trees as arrays: per node its feature column (into ``features``), threshold
    (``x <= t`` goes left), left / right child (-1 at a leaf) and leaf value; the trees' nodes are
    concatenated and ``roots`` says where each tree starts. ``p = sigmoid(baseline + sum of leaves)``."""

    features: tuple[str, ...]
    baseline: float
    roots: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    depth: int

    def __post_init__(self):
        _check_features(self.features)
        if len({len(self.feature), len(self.threshold), len(self.left), len(self.right), len(self.value)}) != 1:
            raise ValueError("fusion tree arrays disagree in length")

    @property
    def columns(self) -> list[int]:
        return [FEATURES.index(f) for f in self.features]

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        x = features[:, self.columns]
        rows = np.arange(len(x))
        node = np.repeat(self.roots[None, :], len(x), axis=0)  # (lines, trees): every tree walked at once
        for _ in range(self.depth):
            leaf = self.left[node] < 0
            go_left = x[rows[:, None], np.maximum(self.feature[node], 0)] <= self.threshold[node]
            node = np.where(leaf, node, np.where(go_left, self.left[node], self.right[node]))
        raw = self.baseline + self.value[node].sum(axis=1)
        return 1.0 / (1.0 + np.exp(-raw))

    fuse = FusionModel.fuse

    def to_json(self) -> dict[str, Any]:
        return {"kind": "trees", "version": FEATURES_VERSION, "features": list(self.features),
                "baseline": float(self.baseline), "depth": int(self.depth), "roots": self.roots.tolist(),
                "feature": self.feature.tolist(), "threshold": self.threshold.tolist(), "left": self.left.tolist(),
                "right": self.right.tolist(), "value": self.value.tolist()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TreeFusionModel:
        arrays = {k: np.asarray(data[k], dtype=np.int64) for k in ("roots", "feature", "left", "right")}
        return cls(tuple(data["features"]), float(data["baseline"]), threshold=np.asarray(data["threshold"]),
                   value=np.asarray(data["value"]), depth=int(data["depth"]), **arrays)


def fusion_from_json(data: Mapping[str, Any]):
    if data.get("version") != FEATURES_VERSION:
        raise ValueError(f"fusion model computed with feature version {data.get('version')}, "
                         f"this runtime computes version {FEATURES_VERSION}: re-fit it")
    if data.get("kind") == "trees":
        return TreeFusionModel.from_json(data)
    return FusionModel.from_json(data)


def load_fusion(model_dir: str | Path, recorded: Mapping[str, Any] | None):
    """The fusion model ``squeez_encoder.json`` names (``recorded``: its ``fusion`` entry), or None."""
    if not recorded:
        return None
    path = Path(model_dir) / recorded.get("file", FUSION_FILE)
    if not path.is_file():
        raise FileNotFoundError(f"{model_dir} names a fusion model {path.name} that is not there")
    model = fusion_from_json(json.loads(path.read_text()))
    if list(model.features) != list(recorded.get("features", model.features)):
        raise ValueError(f"{path} features differ from those squeez_encoder.json records")
    return model


def fuse_all(model: Any, pairs: Sequence[tuple[str, str]], scores: list[np.ndarray]
             ) -> list[np.ndarray]:
    if model is None:
        return scores
    return [model.fuse(query, output, s) for (query, output), s in zip(pairs, scores)]
