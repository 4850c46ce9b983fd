"""The Serve application's arguments: what ``args:`` in a ``serve_configs/*.yaml`` may hold.

``build_app(args)`` fills :class:`ServeAppConfig` through ``squeez_ray.config`` so a typo in a Serve
YAML is one clear error naming the key (and every other bad key), not a replica that crashes later.
Ray Serve deployment options (autoscaling, queue limits, actor resources) and vLLM engine options
are passed through as mappings: Serve and vLLM validate their own flags, we do not re-declare them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

# Environment variables read when the application is built (on the cluster) or when an API replica
# starts. They let one checked-in YAML serve any checkpoint (`SQUEEZ_SERVE_MODEL=... serve run ...`).
MODEL_ENV = "SQUEEZ_SERVE_MODEL"
TOKEN_ENV = "SQUEEZ_SERVE_TOKEN"

MODEL_BACKEND = "vllm"  # the vLLM model replicas behind ray.serve.llm; any other name is a squeez backend


@dataclass
class Limits:
    """Request limits of the pruning API (per API replica)."""

    max_request_bytes: int = 8 * 1024 * 1024  # body size; larger requests get 413
    max_batch_items: int = 256  # items per /v1/prune/batch; more get 413
    # Seconds one request may take. On expiry the API answers 200 with the output unpruned
    # (pruned=false, reason "timeout ..."): DESIGN.md's fail-open, what an agent loop wants.
    request_timeout_s: float = 30.0
    retry_after_s: int = 1  # Retry-After on 503 (queues full)
    # Seconds the whole request body may take to arrive; slower bodies get 408. Each slow client
    # holds an API replica slot, so without it a few hundred trickling bodies starve everyone.
    body_timeout_s: float = 10.0
    # Model calls (one per chunk) one request keeps in flight; keep it below the model replicas'
    # max_ongoing_requests + max_queued_requests, or one large batch alone would be refused.
    max_calls_per_request: int = 8

    def validate(self) -> list[str]:
        problems = []
        for name in ("max_request_bytes", "max_batch_items", "retry_after_s", "max_calls_per_request"):
            if getattr(self, name) < 1:
                problems.append(f"{name}: {getattr(self, name)!r} must be >= 1")
        for name in ("request_timeout_s", "body_timeout_s"):
            if getattr(self, name) <= 0:
                problems.append(f"{name}: {getattr(self, name)!r} must be > 0")
        return problems


@dataclass
class LocalBatching:
    """Serve request batching of the local backends (encoder, bm25, ...) in each pruner replica."""

    max_batch_size: int = 8  # concurrent requests scored in one pruner call; 1 turns batching off
    batch_wait_timeout_s: float = 0.005  # how long the first request waits for others to join

    def validate(self) -> list[str]:
        problems = []
        if self.max_batch_size < 1:
            problems.append(f"max_batch_size: {self.max_batch_size!r} must be >= 1")
        if self.batch_wait_timeout_s < 0:
            problems.append(f"batch_wait_timeout_s: {self.batch_wait_timeout_s!r} must be >= 0")
        return problems


@dataclass
class ServeAppConfig:
    """Arguments of ``squeez_ray.serve.app:build_app`` (the ``args:`` of a Serve config)."""

    # "vllm": model replicas (ray.serve.llm LLMServer) + the pruning API; any other registry name (infer/registry.py)
    # (bm25, first, encoder, ...) runs in the local pruner replicas (pruner_deployment) behind the API.
    backend: str = MODEL_BACKEND
    model: str | None = None  # checkpoint directory; $SQUEEZ_SERVE_MODEL overrides it
    model_id: str = "squeez-pruner"  # the name on /v1/models, in "model" of answers and chat requests
    engine_kwargs: dict[str, Any] = field(default_factory=dict)  # passed to vLLM unchanged
    # Serve options of the model deployment (autoscaling_config, max_ongoing_requests,
    # max_queued_requests, ray_actor_options, ...), passed to ray.serve.llm's LLMConfig.deployment_config.
    model_deployment: dict[str, Any] = field(default_factory=dict)
    # Resources of one model replica as placement-group bundles. CPU-only clusters need this
    # ({bundles: [{CPU: 1}]}): without it ray.serve.llm asks for a GPU.
    placement_group_config: dict[str, Any] | None = None
    accelerator_type: str | None = None  # e.g. A100 (GPU configs only)
    # Serve options of the API (ingress) deployment: num_replicas / autoscaling_config,
    # max_ongoing_requests, max_queued_requests, ray_actor_options, backpressure_config.
    ingress_deployment: dict[str, Any] = field(default_factory=dict)
    # Serve options of the local pruner deployment (every backend but vllm), which the API calls:
    # num_replicas / autoscaling_config, max_ongoing_requests, max_queued_requests (beyond it: 503),
    # ray_actor_options (its CPUs: the encoder scores here, not in the API replica).
    pruner_deployment: dict[str, Any] = field(default_factory=dict)
    # BackendOptions fields for the pruner (system_prompt, max_new_tokens, chunk_overlap_lines,
    # fuzzy_threshold, keep_ratio, min_lines, ...); unknown names are errors.
    pruner: dict[str, Any] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    local_batching: LocalBatching = field(default_factory=LocalBatching)
    auth_token_env: str = TOKEN_ENV  # bearer token read from this variable in the API replicas; unset: no auth

    def validate(self) -> list[str]:
        from squeez_ray.infer.registry import BACKENDS, MODEL_BACKENDS, SHIPPED_MODEL_BACKENDS, BackendOptions

        problems = []
        if self.backend != MODEL_BACKEND and self.backend not in BACKENDS:
            problems.append(f"backend: {self.backend!r} is not a backend (choose {MODEL_BACKEND} or one of "
                            f"{', '.join(sorted(BACKENDS))})")
        if self.backend == "server":
            problems.append("backend: 'server' would call this service itself; choose the model or a local backend")
        needs_model = self.backend == MODEL_BACKEND or (self.backend in MODEL_BACKENDS
                                                        and self.backend not in SHIPPED_MODEL_BACKENDS)
        if needs_model and not self.resolved_model():
            problems.append(f"model: backend {self.backend!r} needs a checkpoint directory "
                            f"(set model: in args or ${MODEL_ENV})")
        allowed = set(BackendOptions.__dataclass_fields__)
        for key in self.pruner:
            if key not in allowed:
                problems.append(f"pruner.{key}: unknown option (allowed: {', '.join(sorted(allowed))})")
        if self.backend == MODEL_BACKEND and self.pruner_deployment:
            problems.append(f"pruner_deployment: backend {MODEL_BACKEND!r} prunes in its model replicas; "
                            "set their Serve options in model_deployment")
        for key in ("model", "served_model_name"):
            if key in self.engine_kwargs:
                problems.append(f"engine_kwargs.{key}: set it with model / model_id, not in engine_kwargs")
        return problems

    def resolved_model(self) -> str | None:
        """The folder or hub id as configured (vLLM resolves a hub id itself, on each replica's node)."""
        model = os.environ.get(MODEL_ENV) or self.model
        # A relative path means "from where I ran serve": replicas may run in another directory.
        if model and not os.path.isabs(model) and os.path.exists(model):
            model = os.path.abspath(model)
        return model

    def local_model(self) -> str | None:
        """The model as a local folder on this node (a hub id through the HF cache; see squeez_ray.hub)."""
        from squeez_ray.hub import resolve_model

        model = self.resolved_model()
        return resolve_model(model, what="model") if model else None


def load_app_config(args: dict[str, Any] | None) -> ServeAppConfig:
    """``args`` of the Serve YAML -> a checked config, or ConfigError listing every problem."""
    from squeez_ray.config import load_config

    return load_config(ServeAppConfig, None, dict(args or {}))
