"""Check that the fast Qwen 3.5 kernels (flash-linear-attention, causal-conv1d) import and run a tiny op.

    python jobs/check_kernels.py [--require]     # exit 1 with --require when one is missing or broken

Run on GPU nodes after set-up (cluster.yaml does): without them training silently takes transformers'
slow PyTorch fallback. A node without CUDA has nothing to check and exits 0.
"""

from __future__ import annotations

import argparse
import sys

from squeez_ray.runner import Outcome, run_job


def work(args: argparse.Namespace) -> Outcome:
    from squeez_ray.train.kernels import report

    return Outcome(exit_code=report(require=args.require))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--require", action="store_true", help="exit 1 when a kernel is missing or broken")
    return run_job("check_kernels", work, argv, parser=parser, logs=False)


if __name__ == "__main__":
    sys.exit(main())
