"""Backend names -> pruners. The CLI, ``squeez eval``, the Serve app and the bulk jobs all resolve
a backend here, so one name means the same thing everywhere.

Each entry imports its module lazily: ``squeez --backend bm25`` must not pay for torch or vLLM.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from squeez_ray.infer.base import Pruner


@dataclass
class BackendOptions:
    model: str | None = None  # checkpoint directory (vllm / transformers / encoder)
    server_url: str | None = None  # openai / server backends
    server_model: str | None = None  # model name the server knows
    api_key: str | None = None
    timeout_s: float = 60.0
    max_retries: int = 3
    batch_size: int = 16
    max_concurrency: int = 8  # in-flight HTTP requests (openai / server backends)
    system_prompt: str | None = None  # None: the checkpoint manifest's prompt, else the project default
    max_context_tokens: int | None = None  # None: the model's own context length
    max_new_tokens: int | None = None  # None: follows the input size
    chunk_overlap_lines: int = 20
    fuzzy_threshold: float = 90.0  # rapidfuzz score (0-100) for mapping a generated line to a source line
    keep_ratio: float = 0.10  # baselines
    seed: int = 0  # random baseline
    device: str | None = None  # transformers / encoder: "cpu", "cuda", ...
    dtype: str | None = None
    threshold: float | None = None  # encoder: override the calibrated threshold
    recall_target: float | None = None  # encoder: the dev recall to operate at (its curve picks the threshold)
    max_kept_lines: int | None = None  # encoder: keep at most this many lines (the highest-scoring)
    engine_kwargs: dict[str, Any] = field(default_factory=dict)  # passed through to vllm.LLM / from_pretrained
    min_lines: int = 0  # outputs shorter than this pass through unpruned


# name -> "module:factory"; each factory takes BackendOptions and returns a Pruner.
BACKENDS: dict[str, str] = {
    "none": "squeez_ray.infer.baselines:build_keep_all",
    "bm25": "squeez_ray.infer.baselines:build_bm25",
    "first": "squeez_ray.infer.baselines:build_first",
    "last": "squeez_ray.infer.baselines:build_last",
    "random": "squeez_ray.infer.baselines:build_random",
    "fake": "squeez_ray.infer.fake:build_fake",
    "vllm": "squeez_ray.infer.vllm_engine:build_vllm",
    "transformers": "squeez_ray.infer.hf_engine:build_transformers",
    "openai": "squeez_ray.infer.openai_engine:build_openai",
    "server": "squeez_ray.infer.server_client:build_server",
    "encoder": "squeez_ray.infer.encoder.pruner:build_encoder",
}
# What a backend needs besides the query and the output. The CLI, squeez eval, bulk evaluation and
# Serve read these groups; none keeps a list of backend names of its own.
MODEL_BACKENDS = ("vllm", "transformers", "encoder")  # a checkpoint (--model); bulk evaluation gives them GPUs
SHIPPED_MODEL_BACKENDS = ("encoder",)  # ... of which these run the model in the package when none is named
SERVER_BACKENDS = ("openai", "server")  # a server to call (--server-url)
BASELINES = ("bm25", "first", "last", "random")  # no model: what squeez eval compares by default ("none" keeps all)


class BackendError(ValueError):
    pass


# Packages the plain `pip install squeez-ray` leaves out, and the extra that brings each: a backend that
# needs one says which extra to install instead of failing with a bare ModuleNotFoundError.
EXTRA_OF_MODULE = {"torch": "'squeez-ray[train]'", "transformers": "'squeez-ray[train]'",
                   "peft": "'squeez-ray[train]'", "vllm": "'squeez-ray[cpu]' (or 'squeez-ray[gpu]' with CUDA)",
                   "ray": "'squeez-ray[ray]'", "pyarrow": "'squeez-ray[ray]'", "datasets": "'squeez-ray[ray]'",
                   "matplotlib": "'squeez-ray[ray]'"}


def build_pruner(name: str, options: BackendOptions | None = None, **overrides: Any) -> Pruner:
    """Make the pruner called ``name``; ``overrides`` set BackendOptions fields."""
    if name not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}; choose one of: {', '.join(BACKENDS)}")
    opts = options or BackendOptions()
    if overrides:
        opts = BackendOptions(**{**opts.__dict__, **overrides})
    module_name, factory = BACKENDS[name].split(":")
    try:
        pruner = getattr(importlib.import_module(module_name), factory)(opts)
    except ModuleNotFoundError as error:
        missing = (error.name or "").split(".")[0]
        if missing not in EXTRA_OF_MODULE:
            raise
        raise BackendError(f"backend {name} needs {missing}, which this install lacks: "
                           f"pip install {EXTRA_OF_MODULE[missing]}") from error
    if opts.min_lines:
        pruner.min_lines = opts.min_lines
    return pruner


def add_backend_arguments(parser: Any) -> None:
    """The backend flags shared by ``squeez``, ``squeez eval`` and the jobs (argparse)."""
    group = parser.add_argument_group("backend options")
    group.add_argument("--model", help="checkpoint directory (vllm, transformers, encoder backends)")
    group.add_argument("--server-url", help="base URL of an OpenAI-compatible server or a squeez Serve endpoint")
    group.add_argument("--server-model", help="model name to ask the server for")
    group.add_argument("--api-key", help="bearer token for the server (default: $SQUEEZ_API_KEY)")
    group.add_argument("--timeout", dest="timeout_s", type=float, help="seconds per request before failing open")
    group.add_argument("--batch-size", type=int, help="requests per engine batch")
    group.add_argument("--max-context-tokens", type=int, help="prompt budget; longer outputs are chunked (vllm: "
                       "also the engine's max_model_len)")
    group.add_argument("--max-new-tokens", type=int, help="cap on one model answer (default: follows the chunk's "
                       "size, up to a quarter of the context)")
    group.add_argument("--fuzzy-threshold", type=float, help="rapidfuzz score (0-100) to map a generated line")
    group.add_argument("--keep-ratio", type=float, help="share of lines the baselines keep (default 0.10)")
    group.add_argument("--seed", type=int, help="seed of the random baseline")
    group.add_argument("--device", help="torch device for transformers / encoder backends")
    group.add_argument("--dtype", help="weights' dtype for vllm / transformers (float32 on CPUs without native "
                       "bf16; default: the checkpoint's)")
    group.add_argument("--threshold", type=float, help="encoder: decision threshold (default: calibrated)")
    group.add_argument("--recall-target", type=float, help="encoder: operate at this dev recall, in (0, 1] "
                       "(higher keeps more lines; default: the model's own, see its model card)")
    group.add_argument("--max-kept-lines", type=int, help="encoder: keep at most this many lines")
    group.add_argument("--min-lines", type=int, help="outputs with fewer lines pass through unpruned")


def backend_options_from_args(args: Any, base: BackendOptions | None = None) -> BackendOptions:
    """BackendOptions from parsed flags; flags left unset keep ``base``'s values."""
    values = dict((base or BackendOptions()).__dict__)
    for name in values:
        flag_value = getattr(args, name, None)
        if flag_value is not None:
            values[name] = flag_value
    return BackendOptions(**values)
