"""Fit the learned lexical + block fusion on top of an exported encoder, compare it on dev, ship it.

    python jobs/fit_fusion.py --model squeez_ray/models/default --cache runs/fusion/cache \
        --train-data data/handlabel/train.parquet --exclude-data runs/fusion/encoder_train.parquet \
        --max-train-lines 300 --max-train 1200 --dev-data data/handlabel/dev.parquet \
        --out runs/fusion/model --report runs/fusion/dev_comparison.json [--ship]

1. Scores the train and dev rows with the encoder once (resumable chunks under --cache; the slow part:
   run it with nice, it picks up where it stopped). --exclude-data drops the train rows the encoder
   itself was trained on (its scores there are over-confident; ``git show REV:data/handlabel/train.parquet``
   at the model card's git_revision gives them).
2. Fits each combiner kind (--kinds: logistic at a few L2 strengths, gradient-boosted trees, the same
   trees constrained to be monotone, at depths 3 and 2) per feature set on train (encoder+lexical,
   encoder+lexical+block, lexical-only), and measures each on dev with the encoder alone: the point
   reaching dev recall --recall-target, the best-F1 point, the best recall at compression >= 0.90.
   --learning-curve refits the winner on 25% and 50% of the train outputs.
3. Keeps the combiner with the best dev F1 at the recall target, writes a copy of --model with
   ``fusion.json`` and the fused dev curve (default: the highest recall at compression >= 0.90) to --out,
   and with --ship installs it as the package's default model (``train/encoder/ship.install``).
The evaluation cases are never read here.
"""

from __future__ import annotations

import argparse
import sys

from squeez_ray.runner import Outcome, run_job


def work(args: argparse.Namespace) -> Outcome:
    from squeez_ray.train.encoder import fusion_job as job

    return Outcome(summary=job.run(args)["summary"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="exported encoder directory (default: the shipped model)")
    parser.add_argument("--train-data", default="data/handlabel/train.parquet")
    parser.add_argument("--dev-data", default="data/handlabel/dev.parquet")
    parser.add_argument("--exclude-data", help="examples to leave out of the fit (the encoder's own training rows)")
    parser.add_argument("--max-train", type=int, default=1200, help="train examples scored (a seeded sample)")
    parser.add_argument("--max-train-lines", type=int, default=300, help="skip train outputs this long or longer")
    parser.add_argument("--max-dev", type=int, help="dev examples scored (a seeded sample; default all)")
    parser.add_argument("--cache", default="runs/fusion/cache", help="where the encoder scores are cached")
    parser.add_argument("--score-only", action="store_true", help="fill the cache and stop")
    parser.add_argument("--cached-only", action="store_true", help="score nothing: fit and measure on the "
                        "selected examples already cached (say how many; a random sample of each split only "
                        "if one selection filled the cache)")
    parser.add_argument("--kinds", default="logistic,trees,trees-monotone",
                        help="combiner kinds to try (comma-separated: logistic, trees, trees-monotone)")
    parser.add_argument("--recall-target", type=float, default=0.60)
    parser.add_argument("--min-compression", type=float, default=0.90)
    parser.add_argument("--out", default="runs/fusion/model", help="the fused model directory to write")
    parser.add_argument("--report", default="runs/fusion/dev_comparison.json")
    parser.add_argument("--ship", action="store_true", help="install --out as the package's default model")
    parser.add_argument("--learning-curve", action="store_true", help="also refit the winner on 25%% and 50%% "
                        "of the train outputs and report its dev measures at each share")
    return run_job("fit_fusion", work, argv, parser=parser, errors=(ValueError,), logs=False)


if __name__ == "__main__":
    sys.exit(main())
