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
# async and light (routing, tokenising, mapping), so it takes many requests at once; the bound that
# matters for overload is the model replicas' max_queued_requests (a full queue answers 503).
INGRESS_DEFAULTS: dict[str, Any] = {"max_ongoing_requests": 64, "max_queued_requests": 128}


def build_app(args: dict[str, Any] | None = None) -> Any:
    """Build the application from the Serve config's ``args`` (ConfigError if they are wrong)."""
    from squeez_ray.serve.ingress import PruneIngress

    config = load_app_config(args)
    options = {**INGRESS_DEFAULTS, **config.ingress_deployment}
    if "num_replicas" not in options and "autoscaling_config" not in options:
        options["num_replicas"] = 1
    # Rejections by the API's own queue come from Serve's proxy; give them a Retry-After too.
    options.setdefault("backpressure_config", {"retry_after_s": config.limits.retry_after_s})
    deployment = PruneIngress.options(name="squeez-api", **options)
    if config.backend == MODEL_BACKEND:
        from squeez_ray.serve.model import build_model_deployment

        llm_server, model_card = build_model_deployment(config)
        return deployment.bind(config, llm_server, model_card)
    return deployment.bind(config)
