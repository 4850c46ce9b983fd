"""Pruning inside the API replica with any pruner of infer/registry.py that needs no model deployment
(bm25 and the other baselines, the encoder): the same ``build_pruner`` the CLI and jobs use.

Concurrent requests to one replica are gathered with Serve's ``@serve.batch`` and scored in one
``prune_batch`` call: the encoder sorts all their windows by length and runs them in shared forward
passes, so eight concurrent requests cost far less than eight calls one after another.
"""

from __future__ import annotations

import asyncio
from typing import Sequence

from ray import serve

from squeez_ray.infer.base import PruneRequest, PruneResult, RenderOptions
from squeez_ray.serve.config import ServeAppConfig


class LocalPruning:
    def __init__(self, config: ServeAppConfig):
        from squeez_ray.infer.registry import BackendOptions, build_pruner

        options = BackendOptions(**{**config.pruner, "model": config.local_model() or config.pruner.get("model")})
        self._pruner = build_pruner(config.backend, options)
        self.name = self._pruner.name
        self._batching = config.local_batching
        self._gathered.set_max_batch_size(self._batching.max_batch_size)
        self._gathered.set_batch_wait_timeout_s(self._batching.batch_wait_timeout_s)
        self._stats = {"calls": 0, "batches": 0, "largest_batch": 0}

    def batch_stats(self) -> dict[str, float]:
        """Requests gathered per pruner call since start (the /healthz ``batching`` field)."""
        return {**self._stats, "max_batch_size": self._batching.max_batch_size,
                "mean_batch": round(self._stats["calls"] / max(self._stats["batches"], 1), 3)}

    async def prune(self, requests: Sequence[PruneRequest], render_options: RenderOptions) -> list[PruneResult]:
        return await self._gathered(list(requests), render_options)

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.005)
    async def _gathered(self, calls: list[list[PruneRequest]],
                        options: list[RenderOptions]) -> list[list[PruneResult]]:
        """Concurrent calls -> one pruner call per distinct render options -> each call's results."""
        self._stats["calls"] += len(calls)
        self._stats["batches"] += 1
        self._stats["largest_batch"] = max(self._stats["largest_batch"], len(calls))
        answers: list[list[PruneResult]] = [[] for _ in calls]
        for render in {(o.line_numbers, o.markers) for o in options}:
            picked = [i for i, o in enumerate(options) if (o.line_numbers, o.markers) == render]
            flat = [r for i in picked for r in calls[i]]
            results = await self._run(flat, RenderOptions(*render))
            start = 0
            for i in picked:
                answers[i] = results[start:start + len(calls[i])]
                start += len(calls[i])
        return answers

    async def _run(self, requests: list[PruneRequest], render_options: RenderOptions) -> list[PruneResult]:
        # A worker thread keeps the event loop free for other requests while a CPU-bound pruner runs.
        # On the API's timeout the thread is not stopped (Python cannot); its late result is dropped.
        # fail_open=False: errors reach the API's one fail-open boundary, which logs and answers them.
        return await asyncio.to_thread(self._pruner.prune_batch, requests, render_options=render_options,
                                       fail_open=False)
