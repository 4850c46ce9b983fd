"""Check an ONNX export against its torch checkpoint on labelled cases, and package it as the
default model (``squeez_ray/models/default``) with a model card saying what it is and how good.

The int8 variant ships when its F1 stays within ``MAX_INT8_F1_DROP`` of fp32 on the cases; else fp32.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

MAX_INT8_F1_DROP = 0.01
CARD_FILE = "model_card.json"
SUMMARY_KEYS = ("f1", "strict_f1", "precision", "recall", "compression", "negatives_empty", "n")


def kept_line_agreement(rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """How closely two systems keep the same lines: share of cases kept identically, mean Jaccard."""
    def lines(row: Mapping[str, Any]) -> set[int]:
        return {n for s, e in row["pred_spans"] for n in range(int(s), int(e) + 1)}

    same, jaccards = 0, []
    for a, b in zip(rows_a, rows_b):
        la, lb = lines(a), lines(b)
        same += la == lb
        jaccards.append(len(la & lb) / len(la | lb) if la | lb else 1.0)
    return {"identical_cases": same / max(len(jaccards), 1), "mean_jaccard": sum(jaccards) / max(len(jaccards), 1)}


def measure(examples: Sequence[Mapping[str, Any]], systems: Mapping[str, Any]) -> dict[str, Any]:
    """Evaluate pruners (label -> Pruner) on the examples: each one's summary, and the kept-line
    agreement of every ONNX variant with the torch checkpoint when one is given as ``torch``."""
    from squeez_ray.evaluate.local import run_evaluation, summarize_systems

    rows = run_evaluation(examples, systems)
    by_system = {label: [r for r in rows if r["system"] == label] for label in systems}
    summaries = summarize_systems(rows)
    out: dict[str, Any] = {label: {k: summaries[label]["overall"][k] for k in SUMMARY_KEYS} for label in systems}
    if "torch" in by_system:
        for label in systems:
            if label != "torch":
                out[label]["agreement_with_torch"] = kept_line_agreement(by_system["torch"], by_system[label])
    if "onnx-fp32" in by_system and "onnx-int8" in by_system:
        out["onnx-int8"]["agreement_with_fp32"] = kept_line_agreement(by_system["onnx-fp32"], by_system["onnx-int8"])
    return out


def pick_variant(quality: Mapping[str, Any]) -> str:
    """int8 unless it loses more than MAX_INT8_F1_DROP F1 against fp32."""
    if "onnx-int8" not in quality or "onnx-fp32" not in quality:
        return "int8" if "onnx-int8" in quality else "fp32"
    return "int8" if quality["onnx-fp32"]["f1"] - quality["onnx-int8"]["f1"] <= MAX_INT8_F1_DROP else "fp32"


def model_card(export_dir: Path, checkpoint: Path, variant: str, quality: Mapping[str, Any] | None,
               eval_data: str | None, description: str | None = None) -> dict[str, Any]:
    manifest_path = checkpoint / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    config = manifest.get("config", {})
    calibration = manifest.get("calibration", {})
    # what the runtime uses: the windows (overlap may differ from training's) and each variant's threshold
    settings = json.loads((export_dir / "squeez_encoder.json").read_text())
    thresholds = settings.get("variant_thresholds") or {}
    return {
        "name": checkpoint.name, "kind": "squeez-encoder-onnx", "variant": variant, "description": description,
        "architecture": "BERT-style encoder + linear line head (mean of each line's tokens and its closing [SEP])",
        # the base as configured (a repo-relative path or hub id), not the trainer's absolute path
        "base_model": config.get("base_model") or manifest.get("base_model"),
        "git_revision": manifest.get("git_revision"),
        "training_data": {"train": config.get("train_data"), "dev": config.get("dev_data"),
                          "counts": manifest.get("counts")},
        "recipe": {k: config.get(k) for k in ("epochs", "batch_size", "learning_rate", "head_learning_rate",
                                              "window", "train_dtype", "num_workers", "calibration_objective",
                                              "target_kept_share", "train_fraction", "keep_layers", "teacher_model",
                                              "distill_weight") if k in config},
        "train_seconds": manifest.get("train_seconds"),
        "calibration_on_dev": {k: calibration.get(k) for k in ("threshold", "objective", "f1", "auc", "recall",
                                                              "precision", "kept_share", "negatives_empty")},
        "int8_threshold_on_dev": thresholds.get("int8"),  # int8's own dev threshold (calibrate_variant)
        "inference_window": settings.get("window"),
        "thresholds_on_dev": settings.get("variant_thresholds"),
        "quality": {"data": eval_data, "note": "evaluation only: never used for training, calibration or tuning",
                    "systems": quality} if quality else None,
        "files": sorted(p.name for p in export_dir.iterdir() if p.is_file()),
    }


def install(export_dir: Path, target: Path, variant: str, card: Mapping[str, Any]) -> dict[str, int]:
    """Copy one ONNX variant + tokenizer + settings + card into ``target`` (atomically replaced)."""
    from squeez_ray.infer.encoder.model import ENCODER_CONFIG
    from squeez_ray.infer.encoder.onnx_runtime import ONNX_FP32, ONNX_INT8, TOKENIZER_FILE

    from squeez_ray.infer.encoder.fusion import FUSION_FILE
    from squeez_ray.io_utils import atomic_dir

    onnx_name = ONNX_INT8 if variant == "int8" else ONNX_FP32
    names = [onnx_name, TOKENIZER_FILE, ENCODER_CONFIG]
    if json.loads((export_dir / ENCODER_CONFIG).read_text()).get("fusion"):  # the learned fusion ships beside it
        names.append(FUSION_FILE)
    # atomic_dir, not a bare mkdtemp: the package's model folder must stay readable by every user
    with atomic_dir(target) as staging:
        for name in names:
            shutil.copy2(export_dir / name, staging / name)
        card = {**card, "files": sorted([*names, CARD_FILE])}
        (staging / CARD_FILE).write_text(json.dumps(card, indent=2) + "\n")
    return {p.name: p.stat().st_size for p in sorted(target.iterdir())}
