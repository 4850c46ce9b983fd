"""Which labelled examples a language model reads whole: prompt plus answer room within its context.

A small model's context (2,048 or 4,096 tokens for Gemma 3 270M on a laptop's KV cache) holds only
part of a labelled set whole; the rest is cut into chunks, each prefilled and answered. Comparisons
against the zero-shot base and the baselines are fairest on the outputs the model reads whole
(``jobs/fit_context.py``), and the quickstart's evaluation stays within a request timeout on a CPU by
sending only those. The prompt counted is the one the model is served (its family's ``<bos>``, the
released layout; squeez_ray.model_family), tokenised by the model's own tokenizer.
"""

from __future__ import annotations

from pathlib import Path


def fitting_examples(examples: list[dict], model_dir: str | Path, *, context_tokens: int,
                     answer_tokens: int) -> list[dict]:
    """The examples whose rendered prompt + ``answer_tokens`` is at most ``context_tokens``, in order."""
    from transformers import AutoTokenizer

    from squeez_ray.model_family import family_of
    from squeez_ray.prompt import DEFAULT_SYSTEM_PROMPT

    if not examples:
        return []
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    family = family_of(model_dir)
    prompts = [family.render_prompt(e["query"], e["tool_output"], DEFAULT_SYSTEM_PROMPT) for e in examples]
    lengths = [len(ids) for ids in tokenizer(prompts, add_special_tokens=False)["input_ids"]]
    return [e for e, n in zip(examples, lengths) if n + answer_tokens <= context_tokens]


def write_fitting(data: str | Path, model: str, out: str | Path, *, context_tokens: int = 4096,
                  answer_tokens: int = 300) -> tuple[int, int]:
    """jobs/fit_context.py: the examples of ``data`` that fit, written to ``out`` (a new .jsonl / .parquet
    file, atomically); ``model`` is a folder or a packaged base name. Returns (kept, read)."""
    from squeez_ray.errors import JobError
    from squeez_ray.hub import ModelNotFoundError, resolve_model
    from squeez_ray.schema.files import read_examples, write_examples

    out = Path(out)
    if out.suffix not in (".jsonl", ".parquet"):
        raise JobError(f"--out {out}: name a .jsonl or .parquet file")
    if out.resolve() == Path(data).resolve():
        raise JobError("--out must not be --data: the input is never modified")
    if answer_tokens < 1 or context_tokens <= answer_tokens:
        raise JobError(f"--context-tokens {context_tokens} must exceed --answer-tokens {answer_tokens} (>= 1)")
    examples = read_examples(data, for_evaluation=True)
    try:
        model_dir = resolve_model(model, what="--model")
    except ModelNotFoundError as error:
        raise JobError(str(error)) from None
    kept = fitting_examples(examples, model_dir, context_tokens=context_tokens, answer_tokens=answer_tokens)
    write_examples(kept, out)  # atomic: staged beside it, then moved in place
    return len(kept), len(examples)
