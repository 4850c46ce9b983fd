"""The transformers backend: ``AutoModelForCausalLM.generate`` in left-padded batches, CPU or GPU.

Slower than vLLM but needs nothing else: the reference for checking the vLLM path, and the engine
on machines without vLLM. ``engine_kwargs`` go to ``from_pretrained`` unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from squeez_ray.infer.generative import ChunkJob, Engine, Generation, GenerativePruner, checkpoint_context_length


class TransformersEngine(Engine):
    def __init__(self, model_dir: str, *, device: str | None = None, dtype: str | None = None, batch_size: int = 16,
                 engine_kwargs: dict[str, Any] | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.tokenizer.padding_side = "left"  # generation continues at the right edge of every row
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        kwargs = dict(engine_kwargs or {})
        if dtype:
            kwargs["dtype"] = getattr(torch, dtype)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, **kwargs).to(self.device).eval()
        self.batch_size = max(1, batch_size)
        self.max_context_tokens = checkpoint_context_length(model_dir)
        self.model_name = Path(model_dir).name

    def generate(self, jobs: Sequence[ChunkJob]) -> list[Generation]:
        import torch

        results: list[Generation | None] = [None] * len(jobs)
        # Similar lengths share a batch, so left padding wastes little compute.
        order = sorted(range(len(jobs)), key=lambda i: len(jobs[i].prompt))
        for start in range(0, len(order), self.batch_size):
            batch_ids = order[start:start + self.batch_size]
            batch = self.tokenizer([jobs[i].prompt for i in batch_ids], return_tensors="pt", padding=True,
                                   add_special_tokens=False).to(self.device)
            limit = max(jobs[i].max_new_tokens for i in batch_ids)
            stop_strings = sorted({s for i in batch_ids for s in jobs[i].stop})
            extra = {"stop_strings": stop_strings, "tokenizer": self.tokenizer} if stop_strings else {}
            with torch.inference_mode():
                out = self.model.generate(**batch, max_new_tokens=limit, do_sample=False,
                                          pad_token_id=self.tokenizer.pad_token_id, **extra)
            width = batch["input_ids"].shape[1]
            stops = set(_eos_ids(self.model, self.tokenizer))
            for row, i in enumerate(batch_ids):
                new = out[row, width:].tolist()[: jobs[i].max_new_tokens]  # each job keeps its own limit
                kept = []
                for token in new:
                    kept.append(token)
                    if token in stops:
                        break
                text = _cut_at_stop(self.tokenizer.decode(kept, skip_special_tokens=True), jobs[i].stop)
                results[i] = Generation(text, int(batch["attention_mask"][row].sum()), len(kept))
        return results  # type: ignore[return-value]

    def close(self) -> None:
        self.model = None


def _cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """Drop the first stop string and what follows (as vLLM does); a batch row may run past its own stop."""
    cuts = [text.find(s) for s in stop if s in text]
    return text[:min(cuts)] if cuts else text


def _eos_ids(model: Any, tokenizer: Any) -> list[int]:
    eos = getattr(model.generation_config, "eos_token_id", None)
    ids = eos if isinstance(eos, list) else [eos] if eos is not None else []
    if tokenizer.eos_token_id is not None:
        ids.append(tokenizer.eos_token_id)
    return ids


def build_transformers(options: Any) -> GenerativePruner:
    if not options.model:
        raise ValueError("the transformers backend needs --model (a checkpoint directory or a hub id Org/name)")
    from squeez_ray.hub import resolve_model

    model_dir = resolve_model(options.model, what="--model")
    engine = TransformersEngine(model_dir, device=options.device, dtype=options.dtype,
                                batch_size=options.batch_size, engine_kwargs=options.engine_kwargs)
    return GenerativePruner(engine, options, model_dir=model_dir)
