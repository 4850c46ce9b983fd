"""Answer nothing when the output most likely does not hold the answer: one decision per output (numpy only).

The per-line threshold keeps any line that scores well, and a near-miss query (a lint code the run does
not report, a test that is not in the log) shares words with many lines, so most negatives still got a
line or two (dev: 16% answered empty). The best line's score alone barely separates them (dev medians:
negatives 0.36, positives 0.40). What does is the query's own vocabulary: 66% of dev negatives name a
symbol-like token (``test_foo``, ``E501``, ``utils.py``) that the output does not contain, against 10% of
positives. So a logistic gate over a few whole-output features decides, after scoring and before the
per-line decision, whether the answer is empty:

- ``best_logit``: the best fused line score, as a logit;
- ``log_lines_kept``: log(1 + lines at or above the threshold);
- ``query_symbols_found``: share of the query's symbol-like tokens found verbatim in the output (1 when it
  names none) and ``query_names_symbols``: whether it names any;
- ``query_terms_found``: share of the query's identifier-aware terms that occur in the output;
- ``log_output_lines``.

It is fitted on train outputs the encoder never read and its probability cut chosen on dev
(``train/encoder/negative_gate_fit.py``, ``jobs/fit_negative_gate.py``), and stored in
``squeez_encoder.json`` as ``negative_gate``. It acts only at the model's default operating point: a caller
who asks for more recall (a recall target or a threshold) gets the threshold alone.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from squeez_ray.infer.encoder.fusion_features import QUERY_CHARS, symbols, terms

FEATURES = ("best_logit", "log_lines_kept", "query_symbols_found", "query_names_symbols", "query_terms_found",
            "log_output_lines")
VERSION = 1


def gate_features(query: str, text: str, scores: np.ndarray, threshold: float,
                  line_terms: Sequence[Collection[str]] | None = None) -> np.ndarray:
    """The features above, in ``FEATURES`` order, for one output and its fused line scores (``line_terms``:
    each line's ``terms`` when the caller has them, as ``block_scores`` does: their union is the output's
    terms, since no term spans a line break, and re-reading a 20,000-line output for them costs ~0.4 s)."""
    query = query[:QUERY_CHARS]
    best = float(np.clip(np.max(scores), 1e-4, 1 - 1e-4)) if len(scores) else 1e-4
    query_symbols = symbols(query)
    query_terms = set(terms(query))
    if line_terms is not None:
        found_terms = {t for t in query_terms if any(t in line for line in line_terms)}
    else:
        found_terms = query_terms & set(terms(text)) if query_terms else set()
    return np.array([
        np.log(best / (1 - best)),
        np.log1p(int(np.count_nonzero(np.asarray(scores) >= threshold))),
        float(np.mean([s in text for s in query_symbols])) if query_symbols else 1.0,
        float(bool(query_symbols)),
        len(found_terms) / max(len(query_terms), 1),
        np.log(text.count("\n") + 1),
    ])


@dataclass(frozen=True)
class NegativeGate:
    mean: tuple[float, ...]  # feature standardisation, from the fit's training rows
    scale: tuple[float, ...]
    coef: tuple[float, ...]  # logistic weights over the standardised features
    bias: float
    cut: float  # P(negative) at or above which the answer is empty (chosen on dev)

    def __post_init__(self):
        if not (len(self.mean) == len(self.scale) == len(self.coef) == len(FEATURES)):
            raise ValueError(f"negative_gate: mean, scale and coef need {len(FEATURES)} values each ({FEATURES})")
        if not 0.0 < self.cut <= 1.0:
            raise ValueError(f"negative_gate.cut must be in (0, 1], not {self.cut}")
        if any(s <= 0 for s in self.scale):
            raise ValueError("negative_gate.scale values must be > 0")

    def p_negative(self, features: np.ndarray) -> float:
        z = (np.asarray(features, dtype=np.float64) - np.asarray(self.mean)) / np.asarray(self.scale)
        return float(1.0 / (1.0 + np.exp(-(z @ np.asarray(self.coef) + self.bias))))

    def answers_nothing(self, query: str, text: str, scores: np.ndarray, threshold: float,
                        line_terms: Sequence[Collection[str]] | None = None) -> bool:
        return self.p_negative(gate_features(query, text, scores, threshold, line_terms)) >= self.cut

    def to_json(self) -> dict[str, Any]:
        return {"version": VERSION, "features": list(FEATURES), "mean": list(self.mean), "scale": list(self.scale),
                "coef": list(self.coef), "bias": self.bias, "cut": self.cut}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "NegativeGate":
        """The gate a model's ``negative_gate`` entry describes (its record-only keys, e.g. ``fitted_on``, aside);
        a gate fitted on other features is a load error, never a silent mis-score."""
        if data.get("version") != VERSION or list(data.get("features", [])) != list(FEATURES):
            raise ValueError(f"negative_gate was fitted on features {data.get('features')} (version "
                             f"{data.get('version')}); this runtime computes {list(FEATURES)} (version {VERSION}): "
                             "refit it with jobs/fit_negative_gate.py")
        return cls(tuple(map(float, data["mean"])), tuple(map(float, data["scale"])), tuple(map(float, data["coef"])),
                   float(data["bias"]), float(data["cut"]))
