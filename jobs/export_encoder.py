"""Export a trained encoder checkpoint to ONNX (fp32 + int8), check it, and optionally ship it.

    python jobs/export_encoder.py --checkpoint runs/encoder/v2 --out runs/encoder/v2-onnx
    python jobs/export_encoder.py --checkpoint runs/encoder/v2 --out runs/encoder/v2-onnx \
        --eval-data ../shared/eval/public_cases.jsonl          # + torch / fp32 / int8 quality and agreement
    python jobs/export_encoder.py --checkpoint runs/encoder/v2 --out runs/encoder/v2-onnx \
        --eval-data ../shared/eval/public_cases.jsonl --ship   # + install as squeez_ray/models/default

--ship copies int8 (or fp32 when int8 loses more than 0.01 F1 on --eval-data) with tokenizer.json,
squeez_encoder.json and a model_card.json (training data, recipe, dev calibration, measured quality)
into the package, where `squeez "query"` with no backend configured finds it. The cases are used to
measure only: thresholds come from the checkpoint's dev split (fp32's from training; int8's own, by
scoring that dev split with the int8 model, since quantised scores shift: --dev-data).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="encoder checkpoint from jobs/train_encoder.py")
    parser.add_argument("--out", required=True, help="directory to write the ONNX export into (replaced)")
    parser.add_argument("--dev-data", help="dev split to calibrate int8's own threshold on (default: the "
                        "checkpoint's dev data, from its manifest; 'none' keeps the fp32 threshold)")
    parser.add_argument("--overlap-lines", type=int, help="lines shared by consecutive windows at inference, "
                        "instead of the training value (fewer: faster, less context at window edges); "
                        "both fp32 and int8 are then recalibrated on the dev data")
    parser.add_argument("--eval-data", help="labelled cases (JSONL) to measure torch / fp32 / int8 on")
    parser.add_argument("--no-torch-eval", action="store_true", help="skip the torch row of --eval-data")
    parser.add_argument("--ship", action="store_true", help="install the export as the package's default model")
    parser.add_argument("--ship-dir", help="install somewhere else than squeez_ray/models/default")
    parser.add_argument("--description", help="one paragraph for the model card: lineage, what it is for")
    args = parser.parse_args(argv)

    from squeez_ray.infer.encoder.pruner import DEFAULT_MODEL_DIR
    from squeez_ray.schema import DataError, read_examples
    from squeez_ray.train.encoder import ship as ship
    from squeez_ray.train.encoder.calibration import calibrate_variant, set_overlap
    from squeez_ray.train.encoder.export import export_checkpoint

    checkpoint = Path(args.checkpoint)
    try:
        dev_data = _dev_data(checkpoint, args.dev_data)
        if args.overlap_lines is not None and not dev_data:
            raise ValueError("--overlap-lines changes the windows, so the thresholds must be recalibrated: "
                             "give --dev-data (or a checkpoint whose manifest names its dev split)")
        info = export_checkpoint(checkpoint, args.out)
        if args.overlap_lines is not None:
            info["window"] = set_overlap(args.out, args.overlap_lines)
            info["fp32_calibration"] = calibrate_variant(args.out, read_examples(dev_data), "fp32")
        if dev_data:
            info["int8_calibration"] = calibrate_variant(args.out, read_examples(dev_data), "int8")
            info["int8_calibration"]["dev_data"] = dev_data
        quality = None
        if args.eval_data:
            # the torch checkpoint scores with its training windows: not comparable once they changed
            with_torch = not args.no_torch_eval and args.overlap_lines is None
            quality = _measure(checkpoint, Path(args.out), args.eval_data, with_torch=with_torch)
            info["quality"] = quality
            (Path(args.out) / "quality.json").write_text(json.dumps(quality, indent=2) + "\n")
        if args.ship:
            variant = ship.pick_variant(quality or {"onnx-int8": {}})
            card = ship.model_card(Path(args.out), checkpoint, variant, quality, args.eval_data, args.description)
            target = Path(args.ship_dir) if args.ship_dir else DEFAULT_MODEL_DIR
            info["shipped"] = {"dir": str(target), "variant": variant, "files": ship.install(Path(args.out), target,
                                                                                            variant, card)}
    except (DataError, FileNotFoundError, ValueError) as error:
        print(f"export_encoder: {error}", file=sys.stderr)
        return 2
    print(json.dumps(info, indent=2))
    return 0


def _dev_data(checkpoint: Path, given: str | None) -> str | None:
    """The dev split int8 is calibrated on: --dev-data, else the one the checkpoint was calibrated on."""
    if given:
        return None if given.lower() == "none" else given
    manifest = checkpoint / "manifest.json"
    recorded = json.loads(manifest.read_text()).get("inputs", {}).get("dev") if manifest.is_file() else None
    return recorded if recorded and Path(recorded).exists() else None


def _measure(checkpoint: Path, export_dir: Path, data: str, *, with_torch: bool) -> dict:
    from squeez_ray.infer.encoder.onnx_runtime import OnnxEncoderPruner
    from squeez_ray.schema import read_examples
    from squeez_ray.train.encoder import ship as ship

    examples = read_examples(data)
    systems = {}
    if with_torch:
        from squeez_ray.infer.encoder.pruner import EncoderPruner

        systems["torch"] = EncoderPruner(checkpoint, dtype="float32")
    systems["onnx-fp32"] = OnnxEncoderPruner(export_dir, dtype="float32")
    systems["onnx-int8"] = OnnxEncoderPruner(export_dir, dtype="int8")
    return ship.measure(examples, systems)


if __name__ == "__main__":
    sys.exit(main())
