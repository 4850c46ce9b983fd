"""Train the encoder line scorer on Ray Train (CPU workers by default).

    python jobs/train_encoder.py --config jobs/configs/encoder_minilm.yaml train_data=DIR/train.parquet dev_data=DIR/dev.parquet
    ray job submit --working-dir . -- python jobs/train_encoder.py --config jobs/configs/encoder_minilm.yaml ...
    python jobs/train_encoder.py --config jobs/configs/encoder_minilm.yaml --recalibrate runs/encoder/minilm target_kept_share=0.1

--recalibrate DIR re-scores the config's dev_data with a trained checkpoint and moves its stored
threshold to target_recall, or to target_kept_share when set (no training). train_data accepts anything squeez_ray.schema.read_examples
reads: the project's Parquet/JSONL, released Squeez data (prompt/response JSONL), a datasets folder.
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="YAML config (jobs/configs/encoder_*.yaml)")
    parser.add_argument("overrides", nargs="*", help="dotted key=value overrides, e.g. epochs=1 window.max_length=256")
    parser.add_argument("--recalibrate", metavar="DIR", help="only re-calibrate this trained checkpoint on dev_data")
    args = parser.parse_args(argv)

    from squeez_ray.config import ConfigError, load_config
    from squeez_ray.encoder.train import EncoderTrainConfig, recalibrate, train_encoder
    from squeez_ray.schema import DataError

    try:
        config = load_config(EncoderTrainConfig, args.config, args.overrides)
    except ConfigError as error:
        print(error, file=sys.stderr)
        return 2
    if args.recalibrate:
        try:
            calibration = recalibrate(args.recalibrate, config.dev_data, config.target_recall, config.target_kept_share,
                                      config.calibration_objective)
        except (DataError, FileNotFoundError, ValueError) as error:
            print(f"train_encoder: {error}", file=sys.stderr)
            return 2
        print(json.dumps({"model": args.recalibrate, "calibration": calibration}, indent=2))
        return 0
    try:
        manifest = train_encoder(config)
    except (DataError, FileNotFoundError, ValueError) as error:  # bad data or paths: say which, no traceback
        print(f"train_encoder: {error}", file=sys.stderr)
        return 2
    print(json.dumps({"model": config.output_dir, "calibration": manifest["calibration"],
                      "train_seconds": manifest["train_seconds"]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
