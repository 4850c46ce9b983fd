"""A small synthetic labelled set for smoke training runs and tests:
``python jobs/synthetic_data.py data/synthetic/train.jsonl --n 64`` (see ``--help``)."""

from __future__ import annotations

import argparse
import sys

from squeez_ray.runner import Outcome, run_job


def work(args: argparse.Namespace) -> Outcome:
    from squeez_ray.train.synthetic import write_synthetic

    write_synthetic(args.out, args.n, seed=args.seed, filler_lines=args.filler_lines)
    return Outcome(notes=[args.out])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="write a synthetic labelled set (JSONL, project format)")
    parser.add_argument("out")
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--filler-lines", type=int, default=0, help="irrelevant lines added to each output")
    return run_job("synthetic_data", work, argv, parser=parser, logs=False)


if __name__ == "__main__":
    sys.exit(main())
