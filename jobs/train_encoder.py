"""Train the encoder line scorer on Ray Train (CPU workers by default).

    python jobs/train_encoder.py --config jobs/configs/encoder_minilm.yaml train_data=DIR/train.parquet dev_data=DIR/dev.parquet
    ray job submit --working-dir . -- python jobs/train_encoder.py --config jobs/configs/encoder_minilm.yaml ...
    python jobs/train_encoder.py --config jobs/configs/encoder_minilm.yaml --recalibrate runs/encoder/minilm target_kept_share=0.1

--in-process trains in this process as one worker, without Ray (num_workers=1): for a GPU box that
holds torch and transformers but no Ray, e.g.
    python jobs/train_encoder.py --config jobs/configs/encoder_v2.yaml --in-process num_workers=1 batch_size=8 use_gpu=true
--recalibrate DIR re-scores the config's dev_data with a trained checkpoint and moves its stored
threshold to target_recall, or to target_kept_share when set (no training). train_data accepts anything squeez_ray.schema.read_examples
reads: the project's Parquet/JSONL, released Squeez data (prompt/response JSONL), a datasets folder.
"""

from __future__ import annotations

import sys

from squeez_ray.train.encoder.run import EncoderTrainConfig
from squeez_ray.runner import Outcome, job_parser, run_job


def work(config: EncoderTrainConfig, args) -> Outcome:
    from squeez_ray.train.encoder.calibration import recalibrate
    from squeez_ray.train.encoder.run import train_encoder

    if args.recalibrate:
        calibration = recalibrate(args.recalibrate, config.dev_data, config.target_recall, config.target_kept_share,
                                  config.calibration_objective)
        return Outcome(summary={"model": args.recalibrate, "calibration": calibration})
    manifest = train_encoder(config, in_process=args.in_process)
    return Outcome(summary={"model": config.output_dir, "calibration": manifest["calibration"],
                            "train_seconds": manifest["train_seconds"]})


def main(argv: list[str] | None = None) -> int:
    parser = job_parser(__doc__, EncoderTrainConfig, config_required=True,
                        config_help="YAML config (jobs/configs/encoder_*.yaml)",
                        overrides_example="epochs=1 window.max_length=256")
    parser.add_argument("--recalibrate", metavar="DIR", help="only re-calibrate this trained checkpoint on dev_data")
    parser.add_argument("--in-process", action="store_true",
                        help="train here as one worker without Ray (num_workers=1; e.g. a GPU box without Ray)")
    # Bad data or paths: say which, no traceback.
    return run_job("train_encoder", work, argv, parser=parser, config_cls=EncoderTrainConfig,
                   errors=(FileNotFoundError, ValueError), logs=False)


if __name__ == "__main__":
    sys.exit(main())
