"""The learned fusion of encoder, lexical and block evidence, applied after encoder scoring (numpy only).

A model directory may hold ``fusion.json`` (written by ``squeez_ray/train/encoder_fusion_fit.py``): a
logistic regression over ``encoder_fusion_features.FEATURES`` (standardised), named in
``squeez_encoder.json`` as ``fusion: {"file", "version", "features"}``. When present, the runtime turns
each output's encoder probabilities into fused probabilities, and every threshold, recall curve and
kept-lines budget of that directory is about the fused scores. A directory without it (every model
exported before) scores exactly as before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from squeez_ray.infer.encoder_fusion_features import FEATURES, FEATURES_VERSION, line_features

FUSION_FILE = "fusion.json"


@dataclass(frozen=True)
class FusionModel:
    """``p = sigmoid(((x[:, columns] - mean) / scale) @ weights + bias)``."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float

    def __post_init__(self):
        unknown = [f for f in self.features if f not in FEATURES]
        if unknown:
            raise ValueError(f"fusion model uses features this runtime does not compute: {unknown}")
        sizes = {len(self.features), len(self.mean), len(self.scale), len(self.weights)}
        if len(sizes) != 1:
            raise ValueError("fusion model arrays disagree in length with its feature list")

    @property
    def columns(self) -> list[int]:
        return [FEATURES.index(f) for f in self.features]

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        x = (features[:, self.columns] - self.mean) / self.scale
        return 1.0 / (1.0 + np.exp(-(x @ self.weights + self.bias)))

    def fuse(self, query: str, tool_output: str, encoder_probs: np.ndarray) -> np.ndarray:
        """Fused keep-probabilities (float32) of one output's lines."""
        lines = tool_output.split("\n")
        if len(lines) != len(encoder_probs):
            raise ValueError(f"{len(encoder_probs)} encoder scores for {len(lines)} lines")
        return self.probabilities(line_features(query, lines, encoder_probs)).astype(np.float32)

    def to_json(self) -> dict[str, Any]:
        return {"kind": "logistic", "version": FEATURES_VERSION, "features": list(self.features),
                "mean": self.mean.tolist(), "scale": self.scale.tolist(), "weights": self.weights.tolist(),
                "bias": float(self.bias)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "FusionModel":
        if data.get("kind") != "logistic":
            raise ValueError(f"unknown fusion model kind {data.get('kind')!r}")
        if data.get("version") != FEATURES_VERSION:
            raise ValueError(f"fusion model computed with feature version {data.get('version')}, "
                             f"this runtime computes version {FEATURES_VERSION}: re-fit it")
        return cls(tuple(data["features"]), np.asarray(data["mean"], dtype=np.float64),
                   np.asarray(data["scale"], dtype=np.float64), np.asarray(data["weights"], dtype=np.float64),
                   float(data["bias"]))


def load_fusion(model_dir: str | Path, recorded: Mapping[str, Any] | None) -> FusionModel | None:
    """The fusion model ``squeez_encoder.json`` names (``recorded``: its ``fusion`` entry), or None."""
    if not recorded:
        return None
    path = Path(model_dir) / recorded.get("file", FUSION_FILE)
    if not path.is_file():
        raise FileNotFoundError(f"{model_dir} names a fusion model {path.name} that is not there")
    model = FusionModel.from_json(json.loads(path.read_text()))
    if list(model.features) != list(recorded.get("features", model.features)):
        raise ValueError(f"{path} features differ from those squeez_encoder.json records")
    return model


def fuse_all(model: FusionModel | None, pairs: Sequence[tuple[str, str]], scores: list[np.ndarray]
             ) -> list[np.ndarray]:
    if model is None:
        return scores
    return [model.fuse(query, output, s) for (query, output), s in zip(pairs, scores)]
