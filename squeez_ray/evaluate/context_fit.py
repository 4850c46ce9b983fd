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
