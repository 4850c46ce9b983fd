"""Fit the whole-output negative gate on train, choose its cut on dev, write it into a model.

    git show c846d64:data/handlabel/train.parquet > runs/gate/encoder_train.parquet   # the encoder's own rows
    python jobs/fit_negative_gate.py --exclude-data runs/gate/encoder_train.parquet \
        --report runs/gate/report.json [--write]

Scores the train examples whose outputs the encoder never trained on, and every dev example, the way a
request is scored (shortlist, fusion; resumable chunks under --cache), then in seconds: a logistic gate per
C on train, and on dev the strictest cut within 0.01 recall and 0.005 F1 of no gate. --write stores it in
the model's squeez_encoder.json as ``negative_gate`` only if it raises dev negatives answered empty by at
least 0.05 (else it clears the entry). The evaluation cases and the test split are never read here.
"""

from __future__ import annotations

import argparse
import sys

from squeez_ray.runner import Outcome, run_job


def work(args: argparse.Namespace) -> Outcome:
    from squeez_ray.train.encoder import negative_gate_fit as job

    result = job.run(args)
    return Outcome(summary=result["summary"], notes=[job.summary_table(result["report"])])


def main(argv: list[str] | None = None) -> int:
    from squeez_ray.train.encoder import negative_gate_fit as job

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="exported encoder directory (default: the shipped model)")
    parser.add_argument("--train-data", default="data/handlabel/train.parquet")
    parser.add_argument("--exclude-data", default=None,
                        help="the encoder's own training rows: their outputs are left out of the fit (by text)")
    parser.add_argument("--dev-data", default="data/handlabel/dev.parquet")
    parser.add_argument("--cache", default="runs/gate/cache", help="where the runtime scores are cached (train/, dev/)")
    parser.add_argument("--cached-only", action="store_true", help="score nothing; fit on the cached examples")
    parser.add_argument("--c-grid", type=lambda s: [float(x) for x in s.split(",")], default=list(job.C_GRID),
                        help="logistic regularisation strengths to try (comma-separated)")
    parser.add_argument("--report", default="runs/gate/report.json")
    parser.add_argument("--write", action="store_true", help="store the gate in the model's squeez_encoder.json")
    return run_job("fit_negative_gate", work, argv, parser=parser, errors=(ValueError,), logs=False)


if __name__ == "__main__":
    sys.exit(main())
