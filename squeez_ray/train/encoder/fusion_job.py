"""The work of ``jobs/fit_fusion.py``: cache encoder scores, fit the fusion variants, compare on dev, and
write (and optionally ship) the fused model directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from squeez_ray.infer.encoder.fusion_features import FEATURES, LEXICAL
from squeez_ray.io_utils import atomic_dir

ENCODER_ONLY = ("enc_logit", "enc_rank", "enc_gap_to_max", "log_lines")
SHAPE = ("blank", "line_len")
# the feature sets compared on dev; each is fitted with every combiner kind below
VARIANTS = {
    "encoder+lexical": ENCODER_ONLY + LEXICAL + SHAPE,
    "encoder+lexical+block": FEATURES,
    "lexical-only": ("log_lines", *LEXICAL, "block_bm25_rel", "block_is_best", "block_exact", *SHAPE),
}
# the combiners tried per feature set: logistic regression at two L2 strengths, gradient-boosted trees
# (depth 3 and 2, 150 rounds), the same trees constrained to rise with every piece of evidence; dev picks
# one per set, then the best set
COMBINERS = (("logistic", 0.1), ("logistic", 1.0), ("trees", 3), ("trees", 2),
             ("trees-monotone", 3), ("trees-monotone", 2))
KINDS = ("logistic", "trees", "trees-monotone")


def _rows(path: str, *, limit: int | None, max_lines: int | None, exclude: str | None) -> list[dict[str, Any]]:
    import pandas as pd

    frame = pd.read_parquet(path)
    if exclude:
        # by output text, not instance id: later labelling rounds ask new queries of outputs the encoder
        # already trained on, under new ids, and its scores on those outputs are over-confident
        frame = frame[~frame.tool_output.isin(set(pd.read_parquet(exclude, columns=["tool_output"]).tool_output))]
    if max_lines:
        frame = frame[frame.tool_output.str.count("\n") < max_lines]
    frame = frame.sample(frac=1.0, random_state=23)  # a seeded order: any cached prefix is a random sample
    if limit:
        frame = frame.head(limit)
    return frame.to_dict("records")


def _cached(rows, cache_dir: Path, score) -> dict[str, np.ndarray]:
    from squeez_ray.train.encoder.fusion_scores import read_cache, score_to_cache

    if score is not None:
        score_to_cache(score, [(r["instance_id"], r["query"], r["tool_output"]) for r in rows], cache_dir)
    return read_cache([cache_dir])


def run(args) -> dict[str, Any]:
    from squeez_ray.infer.encoder.fusion import fuse_all  # noqa: F401 (the runtime applies the same model)
    from squeez_ray.infer.encoder.model import ENCODER_CONFIG
    from squeez_ray.infer.encoder.pruner import DEFAULT_MODEL_DIR
    from squeez_ray.train.encoder import fusion_fit as fit
    from squeez_ray.train.encoder.fusion_scores import claim_for_model, model_id

    model_dir = Path(args.model) if args.model else DEFAULT_MODEL_DIR
    settings = json.loads((model_dir / ENCODER_CONFIG).read_text())
    if settings.get("fusion"):
        raise ValueError(f"{model_dir} already carries a fusion model: fit on the encoder's own export")
    train_rows = _rows(args.train_data, limit=args.max_train, max_lines=args.max_train_lines, exclude=args.exclude_data)
    dev_rows = _rows(args.dev_data, limit=args.max_dev, max_lines=None, exclude=None)
    scorer = None
    if not args.cached_only:
        from squeez_ray.infer.encoder.onnx_runtime import OnnxEncoderPruner

        scorer = OnnxEncoderPruner(model_dir, threshold=0.5).encoder_scores
    cache = Path(args.cache)
    claim_for_model(cache, model_id(model_dir))
    dev_cache = _cached(dev_rows, cache / "dev", scorer)
    train_cache = _cached(train_rows, cache / "train", scorer)
    if args.score_only:
        return {"summary": {"train_scored": len(train_cache), "dev_scored": len(dev_cache)}}
    return compare_and_write(args, model_dir, settings, train_rows, train_cache, dev_rows, dev_cache, fit)


def compare_and_write(args, model_dir: Path, settings, train_rows, train_cache, dev_rows, dev_cache, fit):
    bridge = int(settings.get("bridge_gap", 2))
    x_train, y_train, _, used_train = fit.example_matrices(train_rows, train_cache)
    x_dev, y_dev, p_dev, used_dev = fit.example_matrices(dev_rows, dev_cache)
    if not used_train or not used_dev:
        raise ValueError(f"no cached scores to fit on (train {len(used_train)}, dev {len(used_dev)})")
    results: dict[str, Any] = {}
    encoder_points = fit.sweep(p_dev, y_dev, bridge)
    results["encoder"] = {**fit.summarize(encoder_points, args.recall_target),
                          "at_own_default": _at_threshold(p_dev, y_dev, bridge, _own_threshold(settings))}
    models, specs = {}, {}
    for set_name, features in VARIANTS.items():
        for kind in [k for k in KINDS if k in args.kinds.split(",")]:
            name, best = f"{set_name} ({kind})", None
            for setting in [value for k, value in COMBINERS if k == kind]:
                model = fit_combiner(kind, setting, x_train, y_train, features)
                fused = [model.probabilities(x) for x in x_dev]
                summary = fit.summarize(fit.sweep(fused, y_dev, bridge), args.recall_target)
                key = _selection_key(summary)
                if best is None or key > best[0]:
                    best = (key, setting, model, summary, fused)
            _, setting, model, summary, fused = best
            models[name] = (model, fused)
            specs[name] = (kind, setting, features)
            results[name] = {**summary, ("l2" if kind == "logistic" else "max_depth"): setting}
            if kind == "logistic":
                results[name]["weights"] = dict(zip(model.features, np.round(model.weights, 3).tolist()))
    winner = max(models, key=lambda n: _selection_key(results[n]))
    report = {"train_examples": len(used_train), "dev_examples": len(used_dev),
              "dev_lines": int(sum(len(y) for y in y_dev)), "recall_target": args.recall_target,
              "winner": winner, "variants": results}
    if getattr(args, "learning_curve", False):
        report["learning_curve"] = learning_curve(specs[winner], used_train, x_train, y_train,
                                                  x_dev, y_dev, bridge, args.recall_target)
    report["summary"] = {name: _brief(r) for name, r in results.items()} | {"winner": winner,
                                                                          "train_examples": len(used_train),
                                                                          "dev_examples": len(used_dev)}
    if "learning_curve" in report:
        report["summary"]["learning_curve"] = report["learning_curve"]
    Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).write_text(json.dumps(report, indent=2) + "\n")
    if args.out:
        model, fused = models[winner]
        write_fused_model(model_dir, Path(args.out), model, fused, y_dev, bridge, args.min_compression,
                          {"train_examples": len(used_train), "dev_examples": len(used_dev), "variant": winner,
                           "train_data": args.train_data, "dev_data": args.dev_data, "exclude_data": args.exclude_data,
                           "max_train_lines": args.max_train_lines, "dev_comparison": report["summary"]})
        if args.ship:
            report["shipped"] = ship_fused(Path(args.out), report)
    return report


def fit_combiner(kind: str, setting: float, xs, ys, features: tuple[str, ...]):
    """One combiner of ``COMBINERS``: logistic at L2 ``setting``, or (monotone) trees of depth ``setting``."""
    from squeez_ray.train.encoder import fusion_fit as fit

    if kind == "logistic":
        return fit.fit_logistic(xs, ys, features, l2=setting)
    return fit.fit_trees(xs, ys, features, max_depth=setting, monotone=kind == "trees-monotone")[0]


def learning_curve(spec: tuple[str, float, tuple[str, ...]], used_train, x_train, y_train, x_dev, y_dev,
                   bridge: int, recall_target: float, shares=(0.25, 0.5, 1.0)) -> list[dict[str, Any]]:
    """The winning combiner (``spec``: kind, setting, features) refitted on a seeded share of the train
    *outputs* (all queries of an output stay together) and measured on the same dev rows: does more fusion
    data still help?"""
    from squeez_ray.train.encoder import fusion_fit as fit

    kind, setting, features = spec
    outputs = sorted({str(r["tool_output"]) for r in used_train})
    np.random.default_rng(23).shuffle(outputs)
    curve = []
    for share in shares:
        keep = set(outputs[: max(1, round(share * len(outputs)))])
        rows = [i for i, r in enumerate(used_train) if str(r["tool_output"]) in keep]
        xs, ys = [x_train[i] for i in rows], [y_train[i] for i in rows]
        model = fit_combiner(kind, setting, xs, ys, features)
        summary = fit.summarize(fit.sweep([model.probabilities(x) for x in x_dev], y_dev, bridge), recall_target)
        curve.append({"share": share, "outputs": len(keep), "examples": len(rows), **_brief(summary)})
    return curve


def _selection_key(summary) -> tuple[float, float]:
    """Best dev F1 at the recall target (then best F1 anywhere): the operating point an agent gets."""
    at = summary["at_recall_target"]
    return (at["f1"] if at else -1.0, summary["best_f1"]["f1"])


def _own_threshold(settings) -> float:
    from squeez_ray.infer.encoder.operating_points import threshold_for_recall

    curve = settings.get("operating_points", {}).get("int8", [])
    target = settings.get("default_recall_target")
    return threshold_for_recall(curve, target) if curve and target else settings["variant_thresholds"]["int8"]


def _at_threshold(scores, labels, bridge, threshold):
    from squeez_ray.train.encoder import fusion_fit as fit

    return fit.points_at(scores, labels, bridge, [threshold])[0]


def _brief(result) -> dict[str, Any]:
    def short(point):
        return None if point is None else {k: round(point[k], 3) for k in
                                           ("recall", "precision", "f1", "compression", "negatives_empty")}
    out = {"at_recall_target": short(result["at_recall_target"]), "best_f1": short(result["best_f1"]),
           "best_recall_at_compression_0.90": short(result["best_recall_at_compression_0.90"])}
    if "at_own_default" in result:
        out["at_own_default"] = short(result["at_own_default"])
    return out


def write_fused_model(model_dir: Path, out: Path, model, fused_dev, y_dev, bridge: int, min_compression: float,
                      provenance: dict[str, Any]) -> None:
    """A copy of ``model_dir`` whose scores are the fusion's: fusion.json, and the int8 dev curve, default
    recall target and fallback threshold measured on the fused dev scores."""
    from squeez_ray.infer.encoder.fusion import FUSION_FILE
    from squeez_ray.infer.encoder.fusion_features import FEATURES_VERSION
    from squeez_ray.infer.encoder.model import ENCODER_CONFIG
    from squeez_ray.train.encoder import fusion_fit as fit
    from squeez_ray.train.encoder.operating_curve import (
        operating_curve,
        recall_first_target,
    )

    with atomic_dir(out) as staging:
        for path in model_dir.iterdir():
            if path.is_file():
                shutil.copy2(path, staging / path.name)
        (staging / FUSION_FILE).write_text(json.dumps(model.to_json(), indent=2) + "\n")
        settings = json.loads((staging / ENCODER_CONFIG).read_text())
        curve = operating_curve(fused_dev, y_dev, bridge)
        best = max(fit.sweep(fused_dev, y_dev, bridge), key=lambda p: p["f1"])
        settings["fusion"] = {"file": FUSION_FILE, "version": FEATURES_VERSION, "features": list(model.features),
                              **provenance}
        settings["operating_points"] = {"int8": curve}  # fp32 is not shipped: its encoder curve no longer applies
        settings["variant_thresholds"] = {"int8": best["threshold"]}
        settings["threshold"] = best["threshold"]
        settings["default_recall_target"] = recall_first_target(curve, min_compression)
        (staging / ENCODER_CONFIG).write_text(json.dumps(settings, indent=2) + "\n")


def ship_fused(fused_dir: Path, report: dict[str, Any]) -> dict[str, Any]:
    """Install the fused directory as the package default, its card saying what was added and measured."""
    from squeez_ray.infer.encoder.pruner import DEFAULT_MODEL_DIR
    from squeez_ray.train.encoder import ship as ship

    card_path = fused_dir / ship.CARD_FILE
    card = json.loads(card_path.read_text()) if card_path.is_file() else {}
    settings = json.loads((fused_dir / "squeez_encoder.json").read_text())
    card = {**card, "name": f"{card.get('name', 'encoder')}+fusion", "fusion": settings["fusion"],
            "operating_points": {"dev_data": settings["fusion"]["dev_data"], "int8": settings["operating_points"]["int8"],
                                 "default_recall_target": settings["default_recall_target"]},
            # the encoder-alone public numbers no longer describe this model; its own are in docs/ENCODER.md
            "quality": None, "quality_note": "public cases (evaluation only): docs/ENCODER.md, 'The shipped model'"}
    files = ship.install(fused_dir, DEFAULT_MODEL_DIR, "int8", card)
    return {"dir": str(DEFAULT_MODEL_DIR), "files": files}
