"""Keep the examples whose whole prompt, plus room for an answer, fits a language model's context.

    python jobs/fit_context.py --data ../shared/eval/public_cases.jsonl --model gemma-3-270m \
        --context-tokens 4096 --answer-tokens 300 --out runs/eval/public_fit_4096.jsonl

A comparison of a small model against its zero-shot base, BM25 and the encoder is fairest on the
outputs it reads whole (squeez_ray.evaluate.context_fit says how they are counted). Writes the kept
rows (canonical JSONL or Parquet, by suffix) atomically and prints how many of how many fit; the
input is never modified.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from squeez_ray.runner import Outcome, run_job


def work(args: argparse.Namespace) -> Outcome:
    from squeez_ray.evaluate.context_fit import write_fitting

    kept, read = write_fitting(args.data, args.model, args.out, context_tokens=args.context_tokens,
                               answer_tokens=args.answer_tokens)
    return Outcome(notes=[f"{kept} of {read} examples fit {args.context_tokens} tokens with {args.answer_tokens} "
                          f"for the answer -> {Path(args.out)}"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="labelled examples (.jsonl / .parquet, any format squeez eval reads)")
    parser.add_argument("--model", required=True, help="model directory, or a packaged base name (gemma-3-270m)")
    parser.add_argument("--context-tokens", type=int, default=4096, help="the served context (vLLM max_model_len)")
    parser.add_argument("--answer-tokens", type=int, default=300, help="room kept for the answer")
    parser.add_argument("--out", required=True, help="output file (.jsonl or .parquet); must differ from --data")
    return run_job("fit_context", work, argv, parser=parser, logs=False)


if __name__ == "__main__":
    sys.exit(main())
