"""Training data: labelled rows -> prompt contract -> token ids with the loss on the response only.

Pure functions (``training_row``, ``encode_example``, ``collate``) hold the rules; ``TokenizeBatch`` is
the Ray Data stage that applies them, and ``build_train_dataset`` the driver-side pipeline that reads,
tokenises, counts, batches by token budget (``squeez_ray.train.batching``) and materialises the set of
batches the workers stream with ``get_dataset_shard``.

The prompt is the one inference renders (``render_prompt``: the released layout, hand-built ChatML),
and the response is ``render_target(kept lines)`` plus ``<|im_end|>``, tokenised separately: prompt and
response together are the golden ``training_text`` bytes, and the model learns exactly the
continuation it will be asked for at serving time.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any, Sequence

from squeez_ray.errors import JobError
from squeez_ray.model_family import family_of
from squeez_ray.prompt import (DEFAULT_SYSTEM_PROMPT, END_OF_TURN, IM_END, IM_START, PROMPT_FORMAT, RANGES_FORMAT,
                               render_prompt, render_target)
from squeez_ray.prompt_ranges import default_system_prompt, number_lines, render_ranges_target
from squeez_ray.spans import kept_text, line_numbers_of, split_lines

log = logging.getLogger(__name__)

IGNORE_INDEX = -100  # labels the loss skips (prompt and padding)


class TrainDataError(JobError, ValueError):  # JobError: the job runner reports it as one line, exit 2
    """Bad training input: names the file, row or field."""


def training_row(example: dict[str, Any], prompt_format: str = PROMPT_FORMAT) -> dict[str, Any]:
    """A canonical labelled example -> the scalar columns the tokenizer stage needs.

    ``first_gold`` / ``last_gold`` bound the lines truncation must keep (0 for a negative). The target
    is the kept lines verbatim, or their number ranges in ``squeez-ranges-v1``.
    """
    output = example["tool_output"]
    lines = split_lines(output)
    spans = [(int(s["start_line"]), int(s["end_line"])) if isinstance(s, dict) else (int(s[0]), int(s[1]))
             for s in example.get("gold_spans") or []]
    kept = kept_text(lines, spans).split("\n") if spans else []
    numbers = line_numbers_of(spans)
    return {
        "instance_id": str(example.get("instance_id", "")),
        "query": example["query"],
        "tool_output": output,
        "target": render_ranges_target(numbers) if prompt_format == RANGES_FORMAT else render_target(kept),
        "first_gold": min(numbers) if numbers else 0,
        "last_gold": max(numbers) if numbers else 0,
    }


def warn_without_chatml_tokens(tokenizer: Any, name: str) -> bool:
    """Warn when the tokenizer splits the ChatML markers (a base model not of the Qwen family).

    The prompt is ChatML whatever the base; without single marker tokens it still trains, but the
    model must learn to stop on a multi-token ``<|im_end|>``. Returns whether the markers are single tokens.
    """
    single = all(len(_ids(tokenizer, marker)) == 1 for marker in (IM_START, IM_END))
    if not single:
        log.warning("%s: the tokenizer splits %s / %s into several tokens; the prompt is ChatML regardless "
                    "(the released layout), so generation must stop on the text %r", name, IM_START, IM_END, IM_END)
    return single


@dataclass(frozen=True)
class Encoded:
    input_ids: list[int]
    prompt_len: int
    status: str  # "ok" | "truncated" | "dropped"
    kept_output_lines: int  # lines of the tool output left in the prompt


def encode_example(tokenizer: Any, row: dict[str, Any], *, max_seq_length: int, overlong: str = "truncate",
                   system_prompt: str = DEFAULT_SYSTEM_PROMPT, end_text: str = END_OF_TURN,
                   prefix: str = "", numbered: bool = False) -> Encoded:
    """Token ids of prompt + response and the prompt length (labels are -100 before it).

    ``prefix`` and ``end_text`` come from the base's model family (``squeez_ray.model_family``): Gemma's
    ``<bos>`` before the prompt, exactly as inference renders it; nothing for Qwen. ``numbered``: the
    range format's prompt (lines shown as ``{n}|{line}``, numbered as in the whole output).

    Too long: ``overlong="drop"`` drops it; ``"truncate"`` shrinks the tool output to a window of
    whole lines that still holds every gold line (trailing lines first, then leading ones), found by
    bisection; the target is never cut. Nothing fits: dropped.
    """
    response = _ids(tokenizer, row["target"] + end_text)
    lines = split_lines(row["tool_output"])

    def prompt_ids(first: int, last: int) -> list[int]:  # 1-based inclusive window of output lines
        output = number_lines(lines[first - 1:last], first) if numbered else "\n".join(lines[first - 1:last])
        return _ids(tokenizer, prefix + render_prompt(row["query"], output, system_prompt))

    def fits(ids: list[int]) -> bool:
        return len(ids) + len(response) <= max_seq_length

    full = prompt_ids(1, len(lines))
    if fits(full):
        return Encoded(full + response, len(full), "ok", len(lines))
    if overlong == "drop":
        return Encoded([], 0, "dropped", 0)
    first_gold, last_gold = int(row["first_gold"]), int(row["last_gold"])
    # Phase 1: cut trailing lines after the last gold line (or down to one line for a negative).
    min_last = last_gold or 1
    last = _largest_fitting(min_last, len(lines), lambda b: fits(prompt_ids(1, b)))
    if last is not None:
        ids = prompt_ids(1, last)
        return Encoded(ids + response, len(ids), "truncated", last)
    # Phase 2: also cut leading lines before the first gold line.
    max_first = first_gold or min_last
    first = _smallest_fitting(1, max_first, lambda a: fits(prompt_ids(a, min_last)))
    if first is None:
        return Encoded([], 0, "dropped", 0)
    ids = prompt_ids(first, min_last)
    return Encoded(ids + response, len(ids), "truncated", min_last - first + 1)


def _ids(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _largest_fitting(low: int, high: int, ok) -> int | None:
    """Largest b in [low, high] with ok(b), assuming ok is monotone (true up to some b)."""
    if not ok(low):
        return None
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if ok(mid) else (low, mid - 1)
    return low


def _smallest_fitting(low: int, high: int, ok) -> int | None:
    """Smallest a in [low, high] with ok(a), assuming ok is monotone (false up to some a)."""
    if not ok(high):
        return None
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if ok(mid) else (mid + 1, high)
    return low


def collate(batch: dict[str, Any], *, pad_id: int) -> dict[str, Any]:
    """Right-pad a batch of variable-length ids; labels copy the ids with -100 on prompt and padding."""
    import numpy as np
    import torch

    sequences = [np.asarray(ids, dtype=np.int64) for ids in batch["input_ids"]]
    prompt_lens = [int(n) for n in batch["prompt_len"]]
    width = max(len(s) for s in sequences)
    input_ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    labels = torch.full((len(sequences), width), IGNORE_INDEX, dtype=torch.long)
    attention = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, (ids, prompt_len) in enumerate(zip(sequences, prompt_lens)):
        n = len(ids)
        input_ids[i, :n] = torch.from_numpy(ids)
        labels[i, prompt_len:n] = input_ids[i, prompt_len:n]
        attention[i, :n] = 1
    return {"input_ids": input_ids, "labels": labels, "attention_mask": attention}


class TokenizeBatch:
    """Ray Data stage (an actor: the tokenizer loads once): rows -> input_ids, prompt_len, status."""

    def __init__(self, tokenizer_dir: str, max_seq_length: int, overlong: str, system_prompt: str,
                 prompt_format: str = PROMPT_FORMAT):
        from squeez_ray.train.model import load_tokenizer

        self.tokenizer = load_tokenizer(tokenizer_dir)  # the same fallbacks (pad, template) as the workers
        self.family = family_of(tokenizer_dir)  # <bos> and end-of-turn as inference will use them
        if not self.family.stop:  # a family that stops on the marker text expects it split
            warn_without_chatml_tokens(self.tokenizer, tokenizer_dir)
        self.max_seq_length, self.overlong, self.system_prompt = max_seq_length, overlong, system_prompt
        self.numbered = prompt_format == RANGES_FORMAT

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        out: dict[str, list] = {"instance_id": [], "input_ids": [], "prompt_len": [], "status": [],
                                "n_tokens": [], "kept_output_lines": []}
        keys = list(batch)
        for i in range(len(batch["query"])):
            row = {k: batch[k][i] for k in keys}
            enc = encode_example(self.tokenizer, row, max_seq_length=self.max_seq_length, overlong=self.overlong,
                                 system_prompt=self.system_prompt, end_text=self.family.end_of_turn,
                                 prefix=self.family.prefix, numbered=self.numbered)
            out["instance_id"].append(str(row["instance_id"]))
            out["input_ids"].append(np.asarray(enc.input_ids, dtype=np.int32))
            out["prompt_len"].append(enc.prompt_len)
            out["status"].append(enc.status)
            out["n_tokens"].append(len(enc.input_ids))
            out["kept_output_lines"].append(enc.kept_output_lines)
        return {k: (np.asarray(v) if k != "input_ids" else _object_array(v)) for k, v in out.items()}


def _object_array(items: list) -> Any:
    import numpy as np

    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array


def load_rows(path: str, split: str | None, *, what: str) -> list[dict[str, Any]]:
    """Canonical rows of ``path`` (any format squeez_ray.schema reads), filtered to ``split``."""
    from squeez_ray.schema import read_examples

    rows = read_examples(path)
    if split is not None:
        rows = [r for r in rows if r.get("split") == split]
    if not rows:
        splits = sorted({str(r.get("split")) for r in read_examples(path)}) if split is not None else []
        hint = f" (splits present: {', '.join(splits)})" if splits else ""
        raise TrainDataError(f"{what}: {path} has no rows with split={split!r}{hint}")
    return rows


@dataclass
class PreparedData:
    dataset: Any  # ray.data.Dataset, one row per batch: input_ids (list of sequences), prompt_len (materialised)
    counts: dict[str, int]
    batches_per_worker: int  # per epoch; equal on every worker


def build_train_dataset(rows: Sequence[dict[str, Any]], tokenizer_dir: str, data_cfg: Any, *, max_tokens: int,
                        max_examples: int, num_workers: int = 1, seed: int = 0) -> PreparedData:
    """Tokenise ``rows`` with Ray Data, count ok / truncated / dropped, and batch the trainable ones by token budget."""
    import ray

    from squeez_ray.train.batching import BatchPlanError, padded_tokens, plan_token_batches

    items = [training_row(r, data_cfg.prompt_format) for r in rows]
    random.Random(data_cfg.shuffle_seed).shuffle(items)
    if data_cfg.max_examples:
        items = items[:data_cfg.max_examples]
    items = items * data_cfg.repeat
    system_prompt = data_cfg.system_prompt or default_system_prompt(data_cfg.prompt_format)
    tokenized = ray.data.from_items(items).map_batches(
        TokenizeBatch, fn_constructor_kwargs=dict(tokenizer_dir=tokenizer_dir, max_seq_length=data_cfg.max_seq_length,
                                                  overlong=data_cfg.overlong, system_prompt=system_prompt,
                                                  prompt_format=data_cfg.prompt_format),
        batch_size=data_cfg.tokenize_batch_size, num_cpus=data_cfg.tokenize_num_cpus,
        compute=ray.data.ActorPoolStrategy(size=data_cfg.tokenize_actors),
    ).materialize()
    stats = tokenized.select_columns(["status", "n_tokens"]).to_pandas()
    kept = stats[stats.status != "dropped"]
    counts = {
        "rows": len(items),
        "unique_rows": len(items) // data_cfg.repeat,
        "ok": int((stats.status == "ok").sum()),
        "truncated": int((stats.status == "truncated").sum()),
        "dropped": int((stats.status == "dropped").sum()),
        "train_examples": len(kept),
        "train_tokens": int(kept.n_tokens.sum()),
        "max_tokens": int(kept.n_tokens.max()) if len(kept) else 0,
    }
    if counts["dropped"]:
        log.warning("%d of %d training examples dropped: longer than max_seq_length=%d (overlong=%s)",
                    counts["dropped"], counts["rows"], data_cfg.max_seq_length, data_cfg.overlong)
    if not counts["train_examples"]:
        raise TrainDataError(f"no training example fits max_seq_length={data_cfg.max_seq_length}")
    from ray.data.expressions import col

    # The ids come to the driver once (no larger than the raw rows already here) to be planned into
    # batches; each batch is then one dataset row, so Ray's equal split hands out whole batches.
    examples = tokenized.filter(expr=col("status") != "dropped").select_columns(["input_ids", "prompt_len"]).take_all()
    lengths = [len(e["input_ids"]) for e in examples]
    try:
        plan = plan_token_batches(lengths, max_tokens=max_tokens, max_examples=max_examples, seed=seed,
                                  num_workers=num_workers)
    except BatchPlanError as error:
        raise TrainDataError(str(error)) from None
    batch_rows = [{"input_ids": [[int(t) for t in examples[i]["input_ids"]] for i in batch],
                   "prompt_len": [int(examples[i]["prompt_len"]) for i in batch]} for batch in plan]
    counts.update(batches=len(plan), batched_examples=sum(len(b) for b in plan),
                  padded_tokens=sum(padded_tokens(b, lengths) for b in plan))
    dataset = ray.data.from_items(batch_rows).materialize()
    return PreparedData(dataset, counts, len(plan) // num_workers)
