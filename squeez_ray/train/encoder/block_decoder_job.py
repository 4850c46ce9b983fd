"""The work of ``jobs/fit_block_decoder.py``: fit the block-first pruner on dev and write it into a model.

1. The encoder's per-line scores of every dev line, cached once (resumable chunks, ``encoder_fusion_scores``).
2. Today's per-line decoder at the model's own default point: its dev recall, F1 and compression.
3. The block decoder's shape (``block_decoder_fit.DECODER_GRID``) with the most dev recall at that same
   compression, every line scored; it replaces the per-line decoder only if it wins by ``blocks_win``.
4. The shortlist: for each token budget, the chosen decoder's dev recall with only the shortlisted lines
   scored; the smallest budget within ``max_recall_loss`` of scoring everything (and within the negatives
   slack of ``blocks_win``) wins.
5. With blocks, their dev curve under that budget (the recall targets of ``encoder_operating_curve``) and
   default target: the highest whose dev compression is at least the per-line default's.
The evaluation cases and the test split are never read here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


import numpy as np

from squeez_ray.train.encoder import block_decoder_fit as fit

BUDGETS = (768, 1024, 1536, 2048, 3072)


def _rows(path: str, limit: int | None) -> list[dict[str, Any]]:
    import pandas as pd

    frame = pd.read_parquet(path).sample(frac=1.0, random_state=23)  # the fusion cache's seeded order
    return frame.head(limit).to_dict("records") if limit else frame.to_dict("records")


def dev_curve(examples, scores, rule, targets: Sequence[float]) -> list[dict[str, float]]:
    """For each recall target the strictest threshold reaching it on dev under ``rule`` (as stored curves are)."""
    points = fit.sweep(examples, scores, rule, fit.threshold_grid(scores, n=120))
    curve = []
    for target in targets:
        reached = [p for p in points if p["recall"] >= target]
        if reached:  # the strictest threshold that reaches the target
            best = max(reached, key=lambda p: p["threshold"])
            curve.append({"target_recall": target, **{k: round(v, 4) if k != "threshold" else v
                                                      for k, v in best.items()}})
    return curve


# The block decoder replaces the per-line one only when, at the per-line default's compression, it gains dev
# recall by at least this much without losing F1 or negatives answered empty beyond the slack: a tie keeps
# the incumbent (the ship rule), and recall an agent gains must not be paid with empty answers it loses.
MIN_RECALL_GAIN, F1_SLACK, NEGATIVES_SLACK = 0.01, 0.005, 0.05


def blocks_win(lines: Mapping[str, float], blocks: Mapping[str, float]) -> bool:
    negatives_kept = (np.isnan(lines["negatives_empty"])
                      or blocks["negatives_empty"] >= lines["negatives_empty"] - NEGATIVES_SLACK)
    return (blocks["recall"] >= lines["recall"] + MIN_RECALL_GAIN and blocks["f1"] >= lines["f1"] - F1_SLACK
            and bool(negatives_kept))


def by_family(examples, kept) -> dict[str, dict[str, float]]:
    families = sorted({e.family for e in examples})
    out = {}
    for family in families:
        pairs = [(e, k) for e, k in zip(examples, kept) if e.family == family]
        if any(e.gold for e, _ in pairs):
            out[family] = {"n": len(pairs), **{k: round(v, 3) for k, v in
                                               fit.measure([e for e, _ in pairs], [k for _, k in pairs]).items()}}
    return out


def run(args) -> dict[str, Any]:
    from squeez_ray.infer.encoder.model import ENCODER_CONFIG, EncoderSettings
    from squeez_ray.infer.encoder.onnx_runtime import OnnxEncoderPruner
    from squeez_ray.infer.encoder.operating_points import threshold_for_recall
    from squeez_ray.infer.encoder.pruner import DEFAULT_MODEL_DIR
    from squeez_ray.io_utils import write_json_atomic
    from squeez_ray.train.encoder.fusion_scores import claim_for_model, model_id, read_cache, score_to_cache
    from squeez_ray.train.encoder.operating_curve import CURVE_TARGETS

    model_dir = Path(args.model) if args.model else DEFAULT_MODEL_DIR
    # the incumbent: per-line decisions over every line scored, at the model's own default point
    pruner = OnnxEncoderPruner(model_dir, engine_kwargs={"decoder": "lines", "shortlist_tokens": 0})
    settings = pruner.settings
    rows = _rows(args.dev_data, args.max_dev)
    claim_for_model(args.cache, model_id(model_dir))
    if not args.cached_only:
        score_to_cache(pruner.encoder_scores, [(r["instance_id"], r["query"], r["tool_output"]) for r in rows],
                       Path(args.cache))
    spec = settings.window

    def tokens_of(lines):
        return [len(ids) for ids in pruner.tokenizer.encode(lines, spec.max_tokens_per_line)]

    examples = fit.examples_from_rows(rows, read_cache([args.cache]), tokens_of)
    if len(examples) < 50:
        raise ValueError(f"only {len(examples)} dev examples are cached in {args.cache}: score more first")
    full = fit.fused(examples, pruner.fusion, None)
    line_rule = fit.per_line_rule(settings.bridge_gap)
    line_default = fit.sweep(examples, full, line_rule, [pruner.threshold])[0]
    compression = line_default["compression"]
    decoder, tried = fit.fit_decoder(examples, full, compression)
    block_full = fit.point_at_compression(examples, full, fit.block_rule(decoder), compression)
    use_blocks = blocks_win(line_default, block_full) if args.decoder == "auto" else args.decoder == "blocks"
    rule = fit.block_rule(decoder) if use_blocks else line_rule
    reference = block_full if use_blocks else line_default
    budgets = []
    for budget in args.budgets:
        scores = fit.fused(examples, pruner.fusion, budget)
        point = (fit.point_at_compression(examples, scores, rule, compression) if use_blocks
                 else fit.sweep(examples, scores, rule, [pruner.threshold])[0])
        budgets.append({"shortlist_tokens": budget, **{k: round(v, 4) for k, v in point.items()}})
    within = [b for b in budgets if b["recall"] >= reference["recall"] - args.max_recall_loss
              and not b["negatives_empty"] < reference["negatives_empty"] - NEGATIVES_SLACK]
    chosen = min(within, key=lambda b: b["shortlist_tokens"]) if within else max(budgets, key=lambda b: b["recall"])
    scores = fit.fused(examples, pruner.fusion, chosen["shortlist_tokens"])
    # the chosen decoder's own dev curve over the shortlisted scores: a shortlist moves the fused scores a
    # little (the fusion's rank and block features see fewer scored lines), so its thresholds are its own
    curve = dev_curve(examples, scores, rule, CURVE_TARGETS)
    if use_blocks:
        equal = [p for p in curve if p["compression"] >= compression - 1e-9]
        default_target = (max(equal, key=lambda p: p["target_recall"]) if equal else curve[0])["target_recall"]
    else:  # the per-line decoder answers at the model's own default recall target, as before
        default_target = settings.default_recall_target
    threshold = threshold_for_recall(curve, default_target) if default_target else pruner.threshold
    kept = [rule(s, e, threshold) for s, e in zip(scores, examples)]
    line_kept = [line_rule(s, e, pruner.threshold) for s, e in zip(full, examples)]
    report = {
        "dev_examples": len(examples), "model": str(model_dir),
        "per_line_default": {k: round(v, 4) for k, v in line_default.items()},
        "blocks_every_line_scored": {k: round(v, 4) for k, v in block_full.items()},
        "decoder_chosen": "blocks" if use_blocks else "lines",
        "shipped_default": {"decoder": "blocks" if use_blocks else "lines", "target_recall": default_target,
                            **{k: round(v, 4) for k, v in fit.measure(examples, kept).items()}},
        "decoder": decoder.to_json(), "shortlist_budgets": budgets, "shortlist_tokens": chosen["shortlist_tokens"],
        "decoder_grid": tried, "curve": curve,
        "by_family": {"per_line": by_family(examples, line_kept), "shipped_default": by_family(examples, kept)},
    }
    if args.report:
        write_json_atomic(args.report, report)
    if args.write:
        data = json.loads((model_dir / ENCODER_CONFIG).read_text())
        data["block_decoder"] = {}
        if use_blocks:
            data["block_decoder"] = {**decoder.to_json(), "default_recall_target": default_target,
                                     "fitted_on": {"dev_data": str(args.dev_data), "dev_examples": len(examples),
                                                   "at_compression": round(compression, 4)}}
            data.setdefault("operating_points", {})[f"{pruner.variant}+blocks"] = curve
        data["shortlist_tokens"] = chosen["shortlist_tokens"]
        if not use_blocks:
            data.setdefault("operating_points", {})[f"{pruner.variant}+shortlist"] = curve
        EncoderSettings.from_json(data)  # what is written must load
        write_json_atomic(model_dir / ENCODER_CONFIG, data)
    summary = {k: report[k] for k in ("dev_examples", "per_line_default", "blocks_every_line_scored",
                                       "decoder_chosen", "shipped_default", "decoder", "shortlist_tokens")}
    return {"summary": summary, "report": report}


def summary_table(report: Mapping[str, Any]) -> str:
    """The comparison as Markdown rows (docs)."""
    rows = [("per-line (shipped before)", report["per_line_default"]),
            ("blocks, every line scored", report["blocks_every_line_scored"]),
            (f"{report['decoder_chosen']}, shortlist {report['shortlist_tokens']} tokens (default)",
             report["shipped_default"])]
    lines = ["| decoder | recall | F1 | compression | negatives empty |", "| --- | ---: | ---: | ---: | ---: |"]
    for name, p in rows:
        lines.append(f"| {name} | {p['recall']:.3f} | {p['f1']:.3f} | {p['compression']:.3f} | "
                     f"{p.get('negatives_empty', float('nan')):.3f} |")
    return "\n".join(lines)



