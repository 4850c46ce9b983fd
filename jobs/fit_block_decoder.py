"""Fit the block-first pruner (evidence blocks, a cheap shortlist, block decisions) on dev, write it into a model.

    python jobs/fit_block_decoder.py --model squeez_ray/models/default --cache runs/blocks/cache/dev \
        --dev-data data/handlabel/dev.parquet --report runs/blocks/dev_report.json [--write]

Scores every dev line with the encoder once (resumable chunks under --cache; the slow part), then, in
seconds: the per-line decoder at the model's default point; the block decoder's shape with the most dev
recall at that compression; the smallest shortlist token budget within --max-recall-loss of scoring every
line; the block decoder's dev curve and default recall target. --write stores ``block_decoder``,
``shortlist_tokens`` and the curve in the model's squeez_encoder.json (its ONNX graphs are unchanged).
The evaluation cases and the test split are never read here.
"""

from __future__ import annotations

import argparse
import sys

from squeez_ray.runner import Outcome, run_job


def work(args: argparse.Namespace) -> Outcome:
    from squeez_ray.train.encoder import block_decoder_job as job

    result = job.run(args)
    return Outcome(summary=result["summary"], notes=[job.summary_table(result["report"])])


def main(argv: list[str] | None = None) -> int:
    from squeez_ray.train.encoder import block_decoder_job as job

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="exported encoder directory (default: the shipped model)")
    parser.add_argument("--dev-data", default="data/handlabel/dev.parquet")
    parser.add_argument("--max-dev", type=int, help="dev examples used (a seeded sample; default all)")
    parser.add_argument("--cache", default="runs/blocks/cache/dev", help="where the encoder's dev scores are cached")
    parser.add_argument("--cached-only", action="store_true", help="score nothing; fit on the cached examples")
    parser.add_argument("--budgets", type=lambda s: [int(x) for x in s.split(",")], default=list(job.BUDGETS),
                        help="shortlist token budgets to compare (comma-separated)")
    parser.add_argument("--max-recall-loss", type=float, default=0.01,
                        help="dev recall the shortlist may lose against scoring every line")
    parser.add_argument("--decoder", choices=("auto", "blocks", "lines"), default="auto",
                        help="auto: blocks only if they win on dev (block_decoder_job.blocks_win)")
    parser.add_argument("--report", default="runs/blocks/dev_report.json")
    parser.add_argument("--write", action="store_true", help="store the fit in the model's squeez_encoder.json")
    return run_job("fit_block_decoder", work, argv, parser=parser, errors=(ValueError,), logs=False)


if __name__ == "__main__":
    sys.exit(main())
