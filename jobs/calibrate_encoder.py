"""Measure an exported encoder's dev operating curve and set the recall it answers at by default.

    python jobs/calibrate_encoder.py --model squeez_ray/models/default --dev-data data/handlabel/dev.parquet \
        --min-compression 0.90          # default: the highest dev recall that still cuts >= 90% of lines
    python jobs/calibrate_encoder.py --model DIR --default-recall-target 0.7   # stored curve, new default

For each ONNX variant in the directory (int8, fp32) it scores the dev split once and stores, per recall
target 0.30 ... 0.95, the strictest threshold reaching it with the precision, F1, compression and
negatives answered empty it gives (``operating_points`` in ``squeez_encoder.json``, written
atomically; the model card, when present, gets the same curve). Users then move the operating point
without rescoring: ``squeez --recall-target 0.8``, ``recall_target`` in the config file or a Serve
request, or a kept-lines budget (``--max-kept-lines``). Dev data only: never the evaluation cases.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="exported encoder directory (squeez_encoder.json + ONNX)")
    parser.add_argument("--dev-data", help="the dev split (Parquet or JSONL examples); without it the curves "
                        "already stored are kept and only the default moves")
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--default-recall-target", type=float,
                        help="answer at this dev recall by default, in (0, 1] (default: keep the current default)")
    choice.add_argument("--min-compression", type=float, help="answer by default at the highest dev recall whose "
                        "compression is at least this (recall first, within a reading budget)")
    args = parser.parse_args(argv)

    from squeez_ray.infer.encoder.onnx_runtime import (  # re-exported there, torch-free
        ONNX_FP32,
        ONNX_INT8,
    )
    from squeez_ray.io_utils import write_json_atomic
    from squeez_ray.schema import DataError, read_examples
    from squeez_ray.train.encoder.operating_curve import calibrate_operating_points

    model = Path(args.model)
    try:
        if not (model / "squeez_encoder.json").is_file():
            raise FileNotFoundError(f"{model} is not an exported encoder (no squeez_encoder.json)")
        variants = [v for v, f in (("int8", ONNX_INT8), ("float32", ONNX_FP32)) if (model / f).is_file()]
        if not variants:
            raise FileNotFoundError(f"{model} holds no ONNX model: export it first (jobs/export_encoder.py)")
        dev_rows = read_examples(args.dev_data) if args.dev_data else None
        written = calibrate_operating_points(model, dev_rows, variants, args.default_recall_target,
                                             args.min_compression)
        card_path = model / "model_card.json"
        if card_path.is_file():
            card = json.loads(card_path.read_text())
            measured_on = card.get("operating_points", {}).get("dev_data") if dev_rows is None else {
                "path": args.dev_data, "examples": len(dev_rows)}
            card["operating_points"] = {"dev_data": measured_on, **written}
            write_json_atomic(card_path, card)
    except (DataError, FileNotFoundError, ValueError) as error:
        print(f"calibrate_encoder: {error}", file=sys.stderr)
        return 2
    print(json.dumps(written, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
