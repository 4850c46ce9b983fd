"""Keep the examples whose whole prompt, plus room for an answer, fits a language model's context.

    python jobs/fit_context.py --data ../shared/eval/public_cases.jsonl --model gemma-3-270m \
        --context-tokens 4096 --answer-tokens 300 --out runs/eval/public_fit_4096.jsonl

A small model's context (4,096 tokens for Gemma 3 270M on a laptop's KV cache) holds only part of a
labelled set whole; the rest would be cut into chunks, and a comparison of the model against its
zero-shot base, BM25 and the encoder is fairest on the outputs it reads whole. The prompt counted is
the one the model is served (its family's ``<bos>``, the released layout; squeez_ray.model_family),
tokenised by the model's own tokenizer. Writes the kept rows (canonical JSONL or Parquet, by suffix)
atomically and prints how many of how many fit; the input is never modified.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def fitting_examples(examples: list[dict], model_dir: str | Path, *, context_tokens: int,
                     answer_tokens: int) -> list[dict]:
    """The examples whose rendered prompt + ``answer_tokens`` is at most ``context_tokens``, in order."""
    from transformers import AutoTokenizer

    from squeez_ray.model_family import family_of
    from squeez_ray.prompt import DEFAULT_SYSTEM_PROMPT

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    family = family_of(model_dir)
    prompts = [family.render_prompt(e["query"], e["tool_output"], DEFAULT_SYSTEM_PROMPT) for e in examples]
    lengths = [len(ids) for ids in tokenizer(prompts, add_special_tokens=False)["input_ids"]]
    return [e for e, n in zip(examples, lengths) if n + answer_tokens <= context_tokens]


def work(args: argparse.Namespace):
    from squeez_ray.errors import JobError
    from squeez_ray.hub import ModelNotFoundError, resolve_model
    from squeez_ray.io_utils import atomic_path
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
    with atomic_path(out) as staging:
        # write_examples picks the file type by suffix: write under the real suffix, then move in place
        named = staging.with_name(staging.name + out.suffix)
        write_examples(kept, named)
        named.replace(staging)
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
