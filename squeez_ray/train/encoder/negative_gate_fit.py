"""The work of ``jobs/fit_negative_gate.py``: fit the whole-output negative gate, choose its cut on dev.

1. The model's runtime scores (shortlist, fusion: what ``ScoringPruner.block_scores`` gives a request) of
   the train examples whose outputs the encoder never trained on (``--exclude-data``: its own training rows,
   matched by output text; over-confident scores on seen outputs would teach the gate to trust any high
   score) and of every dev example, cached once in resumable chunks (``fusion_scores``).
2. A logistic regression over ``negative_gate.FEATURES`` per regularisation strength ``C``, on train.
3. On dev, at the model's default threshold with its per-line decisions: for each fit and each cut, the
   dev recall, F1, compression and negatives answered empty. The rule, set before the first run: the
   strictest cut whose dev recall is within ``MAX_RECALL_LOSS`` and F1 within ``MAX_F1_LOSS`` of no gate;
   across fits the most negatives answered empty (then F1). It is written into the model only if it raises
   dev negatives answered empty by at least ``MIN_NEGATIVES_GAIN``: a tie keeps the incumbent.
The evaluation cases and the test split are never read here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from squeez_ray.infer.encoder.negative_gate import FEATURES, NegativeGate, gate_features
from squeez_ray.train.encoder.block_decoder_fit import Example, examples_from_rows, measure

MAX_RECALL_LOSS, MAX_F1_LOSS, MIN_NEGATIVES_GAIN = 0.01, 0.005, 0.05
C_GRID = (0.1, 1.0, 10.0)
CUTS = tuple(round(c, 2) for c in np.arange(0.95, 0.04, -0.01))  # P(negative) cuts, strictest last


def feature_matrix(examples: Sequence[Example], scores: Sequence[np.ndarray], threshold: float) -> np.ndarray:
    return np.array([gate_features(e.query, "\n".join(e.lines), s, threshold) for e, s in zip(examples, scores)])


def fit_gate(features: np.ndarray, is_negative: np.ndarray, c: float) -> NegativeGate:
    """A logistic regression on standardised features (sklearn at fit time; numpy arrays in the model)."""
    from sklearn.linear_model import LogisticRegression

    mean, scale = features.mean(axis=0), features.std(axis=0)
    scale = np.where(scale > 1e-9, scale, 1.0)  # a constant feature: no weight to learn, none to divide by
    model = LogisticRegression(C=c, max_iter=2000).fit((features - mean) / scale, is_negative)
    return NegativeGate(tuple(mean), tuple(scale), tuple(model.coef_[0]), float(model.intercept_[0]), cut=1.0)


def gated(kept: Sequence[list[int]], p_negative: np.ndarray, cut: float) -> list[list[int]]:
    return [[] if p >= cut else k for k, p in zip(kept, p_negative)]


def choose_cut(examples: Sequence[Example], kept: Sequence[list[int]], p_negative: np.ndarray
               ) -> tuple[float | None, dict[str, float], list[dict[str, float]]]:
    """The strictest cut within the losses (None: none is), what it measures, and every cut's point."""
    base = measure(examples, kept)
    points, chosen, at = [], None, base
    for cut in CUTS:  # from lenient to strict: the last one within the losses wins
        point = {"cut": cut, **measure(examples, gated(kept, p_negative, cut))}
        points.append(point)
        if point["recall"] >= base["recall"] - MAX_RECALL_LOSS and point["f1"] >= base["f1"] - MAX_F1_LOSS:
            chosen, at = cut, point
    return chosen, at, points


def gate_wins(base: dict[str, float], chosen: dict[str, float]) -> bool:
    return chosen["negatives_empty"] >= base["negatives_empty"] + MIN_NEGATIVES_GAIN


def runtime_id(model_dir: Path, settings: Any) -> str:
    """What decides the runtime scores: the encoder (``fusion_scores.model_id``), the fusion's file, the
    shortlist budget. A cache of another runtime's scores is refused."""
    from squeez_ray.train.encoder.fusion_scores import model_id

    digest = hashlib.sha256(model_id(model_dir).encode())
    if settings.fusion.get("file"):
        digest.update((model_dir / settings.fusion["file"]).read_bytes())
    digest.update(str(settings.shortlist_tokens).encode())
    return digest.hexdigest()[:16]


def _rows(path: str, exclude: str | None) -> list[dict[str, Any]]:
    import pandas as pd

    frame = pd.read_parquet(path)
    if exclude:
        seen = set(pd.read_parquet(exclude, columns=["tool_output"])["tool_output"])
        frame = frame[~frame["tool_output"].isin(seen)]
    return frame.to_dict("records")


def run(args) -> dict[str, Any]:
    import json

    from squeez_ray.infer.encoder.model import ENCODER_CONFIG, EncoderSettings
    from squeez_ray.infer.encoder.onnx_runtime import OnnxEncoderPruner
    from squeez_ray.infer.encoder.pruner import DEFAULT_MODEL_DIR
    from squeez_ray.infer.encoder.scoring import select_lines
    from squeez_ray.io_utils import write_json_atomic
    from squeez_ray.train.encoder.fusion_scores import claim_for_model, read_cache, score_to_cache

    model_dir = Path(args.model) if args.model else DEFAULT_MODEL_DIR
    # the runtime as a request meets it at the default point, without any gate the model may already carry
    pruner = OnnxEncoderPruner(model_dir, engine_kwargs={"decoder": "lines", "negative_gate": False})
    threshold = pruner.threshold
    cache = Path(args.cache)
    splits = {"train": _rows(args.train_data, args.exclude_data), "dev": _rows(args.dev_data, None)}
    for name, rows in splits.items():
        claim_for_model(cache / name, runtime_id(model_dir, pruner.settings))
        if not args.cached_only:
            score_to_cache(lambda pairs: [s for s, _ in pruner.block_scores(pairs)],
                           [(r["instance_id"], r["query"], r["tool_output"]) for r in rows], cache / name)
    # the cached examples, each carrying its runtime scores as ``raw`` (no token counts needed here)
    train, dev = (examples_from_rows(splits[name], read_cache([cache / name]), lambda lines: [])
                  for name in ("train", "dev"))
    train_scores, dev_scores = [e.raw for e in train], [e.raw for e in dev]
    negatives = sum(not e.gold for e in train)
    if negatives < 10 or len(train) - negatives < 10 or len(dev) < 50:
        raise ValueError(f"too little to fit on: {len(train)} train examples ({negatives} negatives), {len(dev)} dev "
                         "(score more first, or drop --cached-only)")
    x_train = feature_matrix(train, train_scores, threshold)
    y_train = np.array([not e.gold for e in train])
    x_dev = feature_matrix(dev, dev_scores, threshold)
    kept = [select_lines(s, threshold, pruner.settings.bridge_gap) for s in dev_scores]
    base = measure(dev, kept)
    fits = []
    for c in args.c_grid:
        gate = fit_gate(x_train, y_train, c)
        p = np.array([gate.p_negative(x) for x in x_dev])
        cut, point, points = choose_cut(dev, kept, p)
        fits.append({"C": c, "gate": gate, "cut": cut, "point": point, "points": points})
    within = [f for f in fits if f["cut"] is not None]
    best = max(within, key=lambda f: (round(f["point"]["negatives_empty"], 4), f["point"]["f1"])) if within else None
    ships = best is not None and gate_wins(base, best["point"])
    rounded = lambda point: {k: round(v, 4) for k, v in point.items()}  # noqa: E731
    report = {
        "model": str(model_dir), "threshold": threshold,
        "train_examples": len(train), "train_negatives": int(negatives), "dev_examples": len(dev),
        "dev_negatives": int(sum(not e.gold for e in dev)),
        "rule": {"max_recall_loss": MAX_RECALL_LOSS, "max_f1_loss": MAX_F1_LOSS,
                 "min_negatives_gain": MIN_NEGATIVES_GAIN},
        "no_gate": rounded(base),
        "fits": [{"C": f["C"], "cut": f["cut"], "at_cut": rounded(f["point"]), "coef": list(f["gate"].coef),
                  "curve": [rounded(p) for p in f["points"]]} for f in fits],
        "chosen": None if best is None else {"C": best["C"], "cut": best["cut"], **rounded(best["point"])},
        "ships": ships, "features": list(FEATURES),
    }
    if args.report:
        write_json_atomic(args.report, report)
    if args.write:
        settings = json.loads((model_dir / ENCODER_CONFIG).read_text())
        settings["negative_gate"] = {}
        if ships:
            gate = best["gate"]
            settings["negative_gate"] = {
                **NegativeGate(gate.mean, gate.scale, gate.coef, gate.bias, best["cut"]).to_json(),
                "fitted_on": {"train_data": str(args.train_data), "exclude_data": args.exclude_data,
                              "train_examples": len(train), "train_negatives": int(negatives),
                              "dev_data": str(args.dev_data), "dev_examples": len(dev), "C": best["C"],
                              "at_threshold": threshold, "dev_no_gate": rounded(base),
                              "dev_with_gate": rounded(best["point"])}}
        EncoderSettings.from_json(settings)  # what is written must load
        write_json_atomic(model_dir / ENCODER_CONFIG, settings)
    summary = {k: report[k] for k in ("train_examples", "train_negatives", "dev_examples", "no_gate", "chosen", "ships")}
    return {"summary": summary, "report": report}


def summary_table(report: dict[str, Any]) -> str:
    rows = [("no gate (default point)", report["no_gate"])]
    if report["chosen"]:
        rows.append((f"gate C={report['chosen']['C']} cut {report['chosen']['cut']}", report["chosen"]))
    lines = ["| dev | recall | F1 | compression | negatives empty |", "| --- | ---: | ---: | ---: | ---: |"]
    lines += [f"| {name} | {p['recall']:.3f} | {p['f1']:.3f} | {p['compression']:.3f} | {p['negatives_empty']:.3f} |"
              for name, p in rows]
    return "\n".join(lines + [f"ships: {report['ships']}"])
