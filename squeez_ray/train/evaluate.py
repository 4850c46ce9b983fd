"""In-training evaluation: generate on a dev sample with the model being trained, score as METRICS.md says.

Runs inside the rank-0 worker at epoch ends, on the live PEFT model (no merge, no engine), through the
same prompt contract, reply parsing and verbatim mapping as the served pruner, so the numbers are
comparable with ``squeez eval`` on the merged checkpoint.
"""

from __future__ import annotations

from typing import Any, Sequence

from squeez_ray.prompt import parse_target, render_prompt


def eval_row(example: dict[str, Any]) -> dict[str, Any]:
    """The fields evaluation needs from a canonical labelled row (small: it travels to the worker)."""
    spans = [[int(s["start_line"]), int(s["end_line"])] if isinstance(s, dict) else [int(s[0]), int(s[1])]
             for s in example.get("gold_spans") or []]
    return {"instance_id": str(example.get("instance_id", "")), "query": example["query"],
            "tool_output": example["tool_output"], "gold_spans": spans}


def generate_replies(model: Any, tokenizer: Any, rows: Sequence[dict[str, Any]], *, system_prompt: str,
                     max_new_tokens: int, batch_size: int) -> list[str]:
    """Greedy replies for ``rows`` (left-padded batches), decoded without special tokens."""
    import torch

    was_training, side = model.training, tokenizer.padding_side
    model.eval()
    tokenizer.padding_side = "left"  # generation continues from the right edge
    replies: list[str] = []
    try:
        device = next(p for p in model.parameters()).device
        for start in range(0, len(rows), batch_size):
            chunk = rows[start:start + batch_size]
            prompts = [render_prompt(r["query"], r["tool_output"], system_prompt) for r in chunk]
            batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
            with torch.no_grad():
                out = model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False, use_cache=True,
                                     pad_token_id=tokenizer.pad_token_id)
            new_tokens = out[:, batch["input_ids"].shape[1]:]
            replies.extend(tokenizer.batch_decode(new_tokens, skip_special_tokens=True))
    finally:
        tokenizer.padding_side = side
        model.train(was_training)
    return replies


def score_replies(rows: Sequence[dict[str, Any]], replies: Sequence[str], *, fuzzy_threshold: float) -> dict[str, float]:
    """Macro means of METRICS.md's F1 (fuzzy), strict recall, compression and negatives' empty rate,
    plus the generated lines the verbatim mapping had to drop."""
    from squeez_ray.evaluate.metrics import score_example, summarize
    from squeez_ray.infer.mapping import map_lines_to_spans

    scored, unmatched = [], 0
    for row, reply in zip(rows, replies):
        mapped = map_lines_to_spans(parse_target(reply).lines, row["tool_output"], threshold=fuzzy_threshold)
        scored.append(score_example(row["tool_output"], row["gold_spans"], mapped.spans))
        unmatched += mapped.unmatched
    summary = summarize(scored)
    keys = ("f1", "recall", "precision", "compression", "negatives_empty")
    out = {k: float(summary[k]) for k in keys if summary.get(k) is not None}
    out["unmatched_lines"] = unmatched / max(len(rows), 1)
    return out


def evaluate_generation(model: Any, tokenizer: Any, rows: Sequence[dict[str, Any]], *, system_prompt: str,
                        max_new_tokens: int, batch_size: int, fuzzy_threshold: float) -> dict[str, float]:
    replies = generate_replies(model, tokenizer, rows, system_prompt=system_prompt, max_new_tokens=max_new_tokens,
                               batch_size=batch_size)
    return score_replies(rows, replies, fuzzy_threshold=fuzzy_threshold)
