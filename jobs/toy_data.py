"""The toy collection input (a git repository with history, its bare mirror, an instances file):
``python jobs/toy_data.py OUT_DIR`` (docs/DATA.md); OUT_DIR must not exist."""

from __future__ import annotations

import argparse
import sys

from squeez_ray.runner import Outcome, run_job


def work(args: argparse.Namespace) -> Outcome:
    from squeez_ray.collect.toy import build_toy_dataset

    return Outcome(notes=[f"{name}: {path}" for name, path in build_toy_dataset(args.out_dir).items()])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", metavar="OUT_DIR", help="folder to create (must not exist)")
    return run_job("toy_data", work, argv, parser=parser, logs=False)


if __name__ == "__main__":
    sys.exit(main())
