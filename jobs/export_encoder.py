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
import sys

from squeez_ray.runner import Outcome, run_job


def work(args: argparse.Namespace) -> Outcome:
    from squeez_ray.train.encoder.export_job import export_encoder

    return Outcome(summary=export_encoder(
        args.checkpoint, args.out, dev_data=args.dev_data, overlap_lines=args.overlap_lines, eval_data=args.eval_data,
        torch_eval=not args.no_torch_eval, ship=args.ship, ship_dir=args.ship_dir, description=args.description))


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
    return run_job("export_encoder", work, argv, parser=parser, errors=(ValueError,), logs=False)


if __name__ == "__main__":
    sys.exit(main())
