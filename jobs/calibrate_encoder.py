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
import sys

from squeez_ray.runner import Outcome, run_job


def work(args: argparse.Namespace) -> Outcome:
    from squeez_ray.train.encoder.operating_curve import calibrate_model

    return Outcome(summary=calibrate_model(args.model, args.dev_data, args.default_recall_target,
                                           args.min_compression))


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
    return run_job("calibrate_encoder", work, argv, parser=parser, errors=(ValueError,), logs=False)


if __name__ == "__main__":
    sys.exit(main())
