"""Pruning through the model replicas: the inference code prepares and assembles, Serve generates.

``GenerativePruner.prepare`` renders the prompt contract and chunks long outputs; each chunk job
becomes one call to the model deployment; ``assemble`` maps the replies back to verbatim source
lines. Nothing here decides which lines are kept: that is the inference code's, one implementation
for the CLI, the bulk jobs and the service.
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

from squeez_ray.infer.base import PruneRequest, PruneResult, RenderOptions
from squeez_ray.serve.config import ServeAppConfig
from squeez_ray.serve.model import ModelClient


class ModelPruning:
    def __init__(self, config: ServeAppConfig, llm_server: Any):
        from squeez_ray.infer.registry import BackendOptions
        from squeez_ray.infer.generative import GenerativePruner

        model_dir = config.local_model()  # the tokenizer and manifest the prompts are rendered with
        options = BackendOptions(**{**config.pruner, "model": model_dir})
        if options.max_context_tokens is None and config.engine_kwargs.get("max_model_len"):
            # The engine's context, not the checkpoint's: prompts must fit what vLLM was started with.
            options.max_context_tokens = int(config.engine_kwargs["max_model_len"])
        self._pruner = GenerativePruner.for_prompting(model_dir, options)
        self._pruner.name = config.model_id
        self._pruner.min_lines = options.min_lines
        self._max_calls = config.limits.max_calls_per_request
        self._client = ModelClient(llm_server, config.model_id)
        self.name = config.model_id

    async def prune(self, requests: Sequence[PruneRequest], render_options: RenderOptions) -> list[PruneResult]:
        results, todo = self._pruner.gate_short(requests)  # the gate every pruning path shares
        if todo:
            # Tokenising and mapping are CPU work: off the event loop, so other requests keep flowing.
            prepared = await asyncio.to_thread(self._pruner.prepare, [requests[i] for i in todo])
            generations = await self._generate_all(prepared.jobs)
            done = await asyncio.to_thread(self._pruner.assemble, prepared, generations, render_options)
            for i, result in zip(todo, done):
                results[i] = result
        return results  # type: ignore[return-value]

    async def _generate_all(self, jobs: Sequence[Any]) -> list[Any]:
        """One model call per chunk job, at most ``max_calls_per_request`` in flight.

        The cap keeps one big batch from filling the model replicas' queue on its own (it would
        then get 503s however idle the service is); overload across requests still reaches the
        queue and becomes 503. On the first failure the request's other calls are cancelled, so a
        rejected or timed-out request stops using the engine.
        """
        slots = asyncio.Semaphore(self._max_calls)

        async def one(job: Any) -> Any:
            async with slots:
                return await self._generate(job)

        tasks = [asyncio.ensure_future(one(job)) for job in jobs]
        try:
            return await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            raise

    async def _generate(self, job: Any) -> Any:
        return await self._client.complete(job.prompt, job.max_new_tokens, job.stop)
