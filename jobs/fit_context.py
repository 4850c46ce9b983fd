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


def work(args: argparse.Namespace):
    from squeez_ray.errors import JobError
    from squeez_ray.evaluate.context_fit import fitting_examples
    from squeez_ray.hub import ModelNotFoundError, resolve_model
    from squeez_ray.runner import Outcome
    from squeez_ray.schema.files import read_examples, write_examples

    out = Path(args.out)
    if out.suffix not in (".jsonl", ".parquet"):
        raise JobError(f"--out {out}: name a .jsonl or .parquet file")
    if out.resolve() == Path(args.data).resolve():
        raise JobError("--out must not be --data: the input is never modified")
    if args.answer_tokens < 1 or args.context_tokens <= args.answer_tokens:
        raise JobError(f"--context-tokens {args.context_tokens} must exceed --answer-tokens {args.answer_tokens} (>= 1)")
    examples = read_examples(args.data, for_evaluation=True)
    try:
        model = resolve_model(args.model, what="--model")
    except ModelNotFoundError as error:
        raise JobError(str(error)) from None
    kept = fitting_examples(examples, model, context_tokens=args.context_tokens, answer_tokens=args.answer_tokens)
    write_examples(kept, out)  # atomic: staged beside it, then moved in place
    print(f"{len(kept)} of {len(examples)} examples fit {args.context_tokens} tokens with {args.answer_tokens} "
          f"for the answer -> {out}")
    return Outcome()


def main(argv: list[str] | None = None) -> int:
    from squeez_ray.runner import run_job

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="labelled examples (.jsonl / .parquet, any format squeez eval reads)")
    parser.add_argument("--model", required=True, help="model directory, or a packaged base name (gemma-3-270m)")
    parser.add_argument("--context-tokens", type=int, default=4096, help="the served context (vLLM max_model_len)")
    parser.add_argument("--answer-tokens", type=int, default=300, help="room kept for the answer")
    parser.add_argument("--out", required=True, help="output file (.jsonl or .parquet); must differ from --data")
    return run_job("fit_context", work, argv, parser=parser, logs=False)


if __name__ == "__main__":
    sys.exit(main())
