"""The local pruners (bm25 and the other baselines, the encoder) as their own deployment, and the
API replica's client for it: the same shape as the model backend (API -> handle -> worker replicas).

Why a deployment of its own rather than the pruner inside the API replica: when a replica that scores
dies (``kill -9``, out of memory on a huge input), the API replica survives it and answers the
requests it held with the documented fail-open (200, ``pruned: false``, the reason) instead of
Serve's proxy answering plain-text 500s; and a request that times out at the API cancels its call,
which reaches the replica and stops the scoring loop between forward passes (infer/cancel.py).

Concurrent requests to one pruner replica are gathered with Serve's ``@serve.batch`` and scored in
one ``prune_batch`` call: the encoder sorts all their windows by length and runs them in shared
forward passes, so eight concurrent requests cost far less than eight calls one after another.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Sequence

from ray import serve

from squeez_ray.infer.base import PruneRequest, PruneResult, RenderOptions, unpruned_result
from squeez_ray.serve.config import ServeAppConfig

PRUNER_DEPLOYMENT = "squeez-pruner"
STATS_TIMEOUT_S = 2.0  # /healthz waits this long for a pruner replica's batching figures, then omits them


@serve.deployment
class LocalPruner:
    """A pruner replica: one pruner of infer/registry.py, scoring in a worker thread."""

    def __init__(self, config: ServeAppConfig):
        from squeez_ray.infer.registry import BackendOptions, build_pruner

        options = BackendOptions(**{**config.pruner, "model": config.local_model() or config.pruner.get("model")})
        self._pruner = build_pruner(config.backend, options)
        self.name = self._pruner.name
        self._batching = config.local_batching
        self._gathered.set_max_batch_size(self._batching.max_batch_size)
        self._gathered.set_batch_wait_timeout_s(self._batching.batch_wait_timeout_s)
        self._stats = {"calls": 0, "batches": 0, "largest_batch": 0, "cancelled": 0}

    def batch_stats(self) -> dict[str, float]:
        """Requests gathered per pruner call since start; ``cancelled``: calls stopped because every
        caller had gone (the /healthz ``batching`` field)."""
        return {**self._stats, "max_batch_size": self._batching.max_batch_size,
                "mean_batch": round(self._stats["calls"] / max(self._stats["batches"], 1), 3)}

    async def prune(self, requests: Sequence[PruneRequest], render_options: RenderOptions) -> list[PruneResult]:
        gone = threading.Event()  # set when this request is cancelled (the API's timeout, a client gone)
        try:
            return await self._gathered(list(requests), render_options, gone)
        except asyncio.CancelledError:
            gone.set()
            raise

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.005)
    async def _gathered(self, calls: list[list[PruneRequest]], options: list[RenderOptions],
                        gone: list[threading.Event]) -> list[list[PruneResult]]:
        """Concurrent calls -> one pruner call per distinct render options -> each call's results."""
        self._stats["calls"] += len(calls)
        self._stats["batches"] += 1
        self._stats["largest_batch"] = max(self._stats["largest_batch"], len(calls))
        answers: list[list[PruneResult]] = [[] for _ in calls]
        for render in {(o.line_numbers, o.markers) for o in options}:
            picked = [i for i, o in enumerate(options) if (o.line_numbers, o.markers) == render]
            flat = [r for i in picked for r in calls[i]]
            results = await self._run(flat, RenderOptions(*render), [gone[i] for i in picked])
            start = 0
            for i in picked:
                answers[i] = results[start:start + len(calls[i])]
                start += len(calls[i])
        return answers

    async def _run(self, requests: list[PruneRequest], render_options: RenderOptions,
                   gone: list[threading.Event]) -> list[PruneResult]:
        from squeez_ray.infer.cancel import Cancelled, cancel_when

        # A worker thread keeps the event loop free for other requests while a CPU-bound pruner runs.
        # Python cannot stop that thread, so the pruner checks between forward passes whether every
        # caller of this call has gone (to_thread copies the check's context variable into the thread).
        # fail_open=False: errors reach the API's one fail-open boundary, which logs and answers them.
        with cancel_when(lambda: all(event.is_set() for event in gone)):
            try:
                return await asyncio.to_thread(self._pruner.prune_batch, requests, render_options=render_options,
                                               fail_open=False)
            except Cancelled:
                self._stats["cancelled"] += 1
                return [unpruned_result(r.tool_output, "cancelled", model=self.name) for r in requests]


class LocalPruning:
    """The API replica's side: one handle call per request; cancelling the caller cancels the call."""

    def __init__(self, config: ServeAppConfig, pruner: Any):
        self._pruner = pruner
        self.name = config.backend  # until the first answer names the pruner (e.g. encoder:default)

    async def prune(self, requests: Sequence[PruneRequest], render_options: RenderOptions) -> list[PruneResult]:
        response = self._pruner.prune.remote(list(requests), render_options)
        try:
            results = await response
        except asyncio.CancelledError:  # the API's timeout: stop the replica's work, not only our wait
            response.cancel()
            raise
        if results and results[0].model:
            self.name = results[0].model
        return results

    async def batch_stats(self) -> dict[str, float] | None:
        """One pruner replica's batching figures, or None when none answers within STATS_TIMEOUT_S."""
        response = self._pruner.batch_stats.remote()
        try:
            return await asyncio.wait_for(response, STATS_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - a replica that is busy, starting or gone: /healthz still answers
            response.cancel()
            return None
