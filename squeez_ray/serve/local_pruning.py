"""Pruning inside the API replica with any pruner of infer/registry.py that needs no model deployment
(bm25 and the other baselines, the encoder): the same ``build_pruner`` the CLI and jobs use."""

from __future__ import annotations

import asyncio
from typing import Sequence

from squeez_ray.infer.base import PruneRequest, PruneResult, RenderOptions
from squeez_ray.serve.config import ServeAppConfig


class LocalPruning:
    def __init__(self, config: ServeAppConfig):
        from squeez_ray.infer.registry import BackendOptions, build_pruner

        options = BackendOptions(**{**config.pruner, "model": config.local_model() or config.pruner.get("model")})
        self._pruner = build_pruner(config.backend, options)
        self.name = self._pruner.name

    async def prune(self, requests: Sequence[PruneRequest], render_options: RenderOptions) -> list[PruneResult]:
        # A worker thread keeps the event loop free for other requests while a CPU-bound pruner runs.
        # On the API's timeout the thread is not stopped (Python cannot); its late result is dropped.
        # fail_open=False: errors reach the API's one fail-open boundary, which logs and answers them.
        return await asyncio.to_thread(self._pruner.prune_batch, list(requests), render_options=render_options,
                                       fail_open=False)
