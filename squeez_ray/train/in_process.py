"""Training without Ray: the same per-worker function (``train_loop_per_worker``) on one in-process worker.

For a machine that holds torch, transformers, peft and accelerate but no Ray (an air-gapped GPU box):
rows are tokenised with the same ``TokenizeBatch`` stage and batched with the same token-budget plan,
then fed through a ``LocalSession``. ``scripts/gpu_check.sh`` uses it when Ray is absent.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from squeez_ray.config import to_dict
from squeez_ray.model_family import family_of
from squeez_ray.prompt_ranges import default_system_prompt
from squeez_ray.train.config import TrainConfig


def train_in_process(config: TrainConfig, run_dir: str | Path, rows: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Fit ``config`` here; returns reports (every logged metric), checkpoints, counts and wall time.

    ``rows``: canonical labelled rows to train on instead of reading ``data.train_path`` (reading goes
    through squeez_ray.schema, which needs pyarrow; an air-gapped GPU box may hold only torch & co.)."""
    from squeez_ray.train.batching import plan_token_batches
    from squeez_ray.train.data import TokenizeBatch, load_rows, training_row
    from squeez_ray.train.loop import train_loop_per_worker
    from squeez_ray.train.model import resolve_base
    from squeez_ray.train.session import LocalSession

    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    base = resolve_base(config.model, run)
    if rows is None:
        rows = load_rows(config.data.train_path, config.data.train_split, what="data.train_path")
    elif config.data.train_split is not None:
        rows = [r for r in rows if r.get("split") == config.data.train_split]
    items = [training_row(r, config.data.prompt_format) for r in rows]
    random.Random(config.data.shuffle_seed).shuffle(items)
    items = items[:config.data.max_examples or None] * config.data.repeat
    system_prompt = config.data.system_prompt or default_system_prompt(config.data.prompt_format)
    tokenized = TokenizeBatch(base, config.data.max_seq_length, config.data.overlong, system_prompt,
                              config.data.prompt_format)(
        {key: [item[key] for item in items] for key in items[0]})
    kept = [i for i, status in enumerate(tokenized["status"]) if status != "dropped"]
    lengths = [len(tokenized["input_ids"][i]) for i in kept]
    plan = plan_token_batches(lengths, max_tokens=config.token_budget(), max_examples=config.train.per_device_batch_size,
                              seed=config.train.seed)
    batches = [{"input_ids": [list(map(int, tokenized["input_ids"][kept[j]])) for j in batch],
                "prompt_len": [int(tokenized["prompt_len"][kept[j]]) for j in batch]} for batch in plan]
    counts = {"rows": len(items), "train_examples": len(kept), "train_tokens": sum(lengths), "batches": len(plan),
              "dropped": len(items) - len(kept)}
    metadata = {"base_model": config.model.base, "base_model_path": base, "prompt_format": config.data.prompt_format,
                "model_family": family_of(base).name, "system_prompt": system_prompt, "lora": to_dict(config.lora), "config": to_dict(config),
                "data": {"train_path": config.data.train_path, **counts}}
    session = LocalSession(batches, run)
    train_loop_per_worker({"config": config, "base": base, "n_batches": len(plan), "metadata": metadata,
                           "eval_rows": None, "deepspeed": None, "session": session})
    return {"reports": session.reports, "checkpoints": session.checkpoints, "counts": counts, "base": base,
            "wall_s": round(time.perf_counter() - started, 1)}
