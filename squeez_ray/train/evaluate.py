"""In-training evaluation: generate on a dev sample with the model being trained, score as METRICS.md says.

Runs inside every worker at epoch ends, each on its own shard of the dev sample (``rows[rank::world]``),
on the live PEFT model (no merge, no engine); the per-example scores are gathered so every rank reports
the same numbers. Rank 0 alone would leave the others blocked in the next step's gradient all-reduce
until NCCL's 30-minute timeout on a long evaluation. Evaluation goes through the
same prompt contract, reply parsing and verbatim mapping as the served pruner, so the numbers are
comparable with ``squeez eval`` on the merged checkpoint.
"""

from __future__ import annotations

from typing import Any, Sequence

from squeez_ray.model_family import family_of_config
from squeez_ray.prompt import PROMPT_FORMAT, RANGES_FORMAT, parse_target


def eval_row(example: dict[str, Any]) -> dict[str, Any]:
    """The fields evaluation needs from a canonical labelled row (small: it travels to the worker)."""
    spans = [[int(s["start_line"]), int(s["end_line"])] if isinstance(s, dict) else [int(s[0]), int(s[1])]
             for s in example.get("gold_spans") or []]
    return {"instance_id": str(example.get("instance_id", "")), "query": example["query"],
            "tool_output": example["tool_output"], "gold_spans": spans}


def generate_replies(model: Any, tokenizer: Any, rows: Sequence[dict[str, Any]], *, system_prompt: str,
                     max_new_tokens: int, batch_size: int, prompt_format: str = PROMPT_FORMAT) -> list[str]:
    """Greedy replies for ``rows`` (left-padded batches), decoded without special tokens."""
    from squeez_ray.prompt_ranges import number_lines
    from squeez_ray.spans import split_lines

    import torch

    was_training, side = model.training, tokenizer.padding_side
    model.eval()
    tokenizer.padding_side = "left"  # generation continues from the right edge
    replies: list[str] = []
    family = family_of_config(model.config.to_dict())  # the prompt and stops serving will use
    extra = {"stop_strings": list(family.stop), "tokenizer": tokenizer} if family.stop else {}
    try:
        device = next(p for p in model.parameters()).device
        for start in range(0, len(rows), batch_size):
            chunk = rows[start:start + batch_size]
            prompts = [family.render_prompt(r["query"], number_lines(split_lines(r["tool_output"]))
                                            if prompt_format == RANGES_FORMAT else r["tool_output"], system_prompt)
                       for r in chunk]
            batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
            with torch.no_grad():
                out = model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False, use_cache=True,
                                     pad_token_id=tokenizer.pad_token_id, **extra)
            new_tokens = out[:, batch["input_ids"].shape[1]:]
            for text in tokenizer.batch_decode(new_tokens, skip_special_tokens=True):
                cuts = [text.find(s) for s in family.stop if s in text]
                replies.append(text[:min(cuts)] if cuts else text)
    finally:
        tokenizer.padding_side = side
        model.train(was_training)
    return replies


def _scored(rows: Sequence[dict[str, Any]], replies: Sequence[str], fuzzy_threshold: float,
            prompt_format: str = PROMPT_FORMAT) -> list[dict[str, Any]]:
    """Per-example scores (METRICS.md) with the generated lines (or range items) that had to be dropped."""
    from squeez_ray.metrics import score_example
    from squeez_ray.infer.mapping import map_lines_to_spans
    from squeez_ray.prompt_ranges import parse_ranges
    from squeez_ray.spans import spans_from_line_numbers, split_lines

    scored = []
    for row, reply in zip(rows, replies):
        if prompt_format == RANGES_FORMAT:
            answer = parse_ranges(reply, 1, len(split_lines(row["tool_output"])))
            spans, dropped = spans_from_line_numbers(answer.line_numbers), answer.malformed + answer.out_of_range
        else:
            mapped = map_lines_to_spans(parse_target(reply).lines, row["tool_output"], threshold=fuzzy_threshold)
            spans, dropped = mapped.spans, mapped.unmatched
        scored.append({**score_example(row["tool_output"], row["gold_spans"], spans), "unmatched_lines": dropped})
    return scored


def _summary(scored: Sequence[dict[str, Any]]) -> dict[str, float]:
    from squeez_ray.metrics import summarize

    summary = summarize(scored)
    keys = ("f1", "recall", "precision", "compression", "negatives_empty")
    out = {k: float(summary[k]) for k in keys if summary.get(k) is not None}
    out["unmatched_lines"] = sum(r["unmatched_lines"] for r in scored) / max(len(scored), 1)
    return out


def score_replies(rows: Sequence[dict[str, Any]], replies: Sequence[str], *, fuzzy_threshold: float) -> dict[str, float]:
    """Macro means of METRICS.md's F1 (fuzzy), strict recall, compression and negatives' empty rate,
    plus the generated lines the verbatim mapping had to drop."""
    return _summary(_scored(rows, replies, fuzzy_threshold))


def gather_scored(scored: list[dict[str, Any]], world: int) -> list[dict[str, Any]]:
    """Every rank's per-example scores, on every rank (torch.distributed; one process: as is)."""
    if world <= 1:
        return scored
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return scored
    parts: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(parts, scored)
    return [row for part in parts for row in part]


def evaluate_generation(model: Any, tokenizer: Any, rows: Sequence[dict[str, Any]], *, system_prompt: str,
                        max_new_tokens: int, batch_size: int, fuzzy_threshold: float, rank: int = 0,
                        world: int = 1, prompt_format: str = PROMPT_FORMAT) -> dict[str, float]:
    """Scores over all of ``rows``; with ``world`` > 1, this rank generates ``rows[rank::world]`` only."""
    mine = list(rows[rank::world]) if world > 1 else list(rows)
    replies = generate_replies(model, tokenizer, mine, system_prompt=system_prompt, max_new_tokens=max_new_tokens,
                               batch_size=batch_size, prompt_format=prompt_format)
    return _summary(gather_scored(_scored(mine, replies, fuzzy_threshold, prompt_format), world))
