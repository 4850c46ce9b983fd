"""The Serve application builder: ``import_path: squeez_ray.serve.app:build_app`` with ``args:``.

    serve run serve_configs/baseline.yaml                       # BM25, no model
    SQUEEZ_SERVE_MODEL=/path/to/merged serve run serve_configs/pruner_cpu.yaml
    serve run squeez_ray.serve.app:build_app backend=bm25       # the same without a YAML

``args`` are described by :class:`squeez_ray.serve.config.ServeAppConfig`; a bad key fails the
deploy with one message listing every problem.
"""

from __future__ import annotations

from typing import Any

from squeez_ray.serve.config import MODEL_BACKEND, load_app_config

# API replica defaults; `ingress_deployment:` in args overrides any of them. The API replica is
# async and light (validation, limits, prompts and mapping, fail-open), so it takes many requests at
# once; the bound that matters for overload is the pruner or model replicas' max_queued_requests
# (a full queue answers 503 with Retry-After).
INGRESS_DEFAULTS: dict[str, Any] = {"max_ongoing_requests": 64, "max_queued_requests": 128}
# Local pruner replica defaults (backends other than vllm); `pruner_deployment:` overrides any of them.
# max_ongoing_requests bounds what one replica gathers into a batch (local_batching.max_batch_size).
PRUNER_DEFAULTS: dict[str, Any] = {"max_ongoing_requests": 8, "max_queued_requests": 32}


def _with_replicas(options: dict[str, Any]) -> dict[str, Any]:
    if "num_replicas" not in options and "autoscaling_config" not in options:
        options["num_replicas"] = 1
    return options


def build_app(args: dict[str, Any] | None = None) -> Any:
    """Build the application from the Serve config's ``args`` (ConfigError if they are wrong)."""
    from squeez_ray.serve.ingress import PruneIngress

    config = load_app_config(args)
    options = _with_replicas({**INGRESS_DEFAULTS, **config.ingress_deployment})
    # Rejections by the API's own queue come from Serve's proxy; give them a Retry-After too.
    options.setdefault("backpressure_config", {"retry_after_s": config.limits.retry_after_s})
    deployment = PruneIngress.options(name="squeez-api", **options)
    if config.backend == MODEL_BACKEND:
        from squeez_ray.serve.model import build_model_deployment

        llm_server, model_card = build_model_deployment(config)
        return deployment.bind(config, llm_server, model_card)
    from squeez_ray.serve.local_pruning import PRUNER_DEPLOYMENT, LocalPruner

    pruner_options = _with_replicas({**PRUNER_DEFAULTS, **config.pruner_deployment})
    return deployment.bind(config, LocalPruner.options(name=PRUNER_DEPLOYMENT, **pruner_options).bind(config))
