"""The openai backend: any OpenAI-compatible server (vLLM, SGLang, ...) via /v1/completions.

The pruner renders the prompt itself (``squeez_ray.prompt``: the released checkpoint's exact
bytes) and sends that text to the completions endpoint: a chat endpoint would render the server's
chat template instead, which for Qwen 3.x adds an empty think block the checkpoint never saw.

Retries follow the project's one policy (``squeez_ray.http_retry``: exponential backoff with jitter
on 408/409/429/5xx and connection errors, honouring Retry-After; the ``openai`` client's own retries
are off), with the client's per-request timeout. We add bounded concurrency (``max_concurrency`` requests in flight) and, when the server's own
tokenizer is not at hand, characters / 4 as the token count (``--model DIR`` gives a local one).
``engine_kwargs`` are sent as extra request-body fields (default: ``add_special_tokens: false``, which
vLLM and SGLang understand: the prompt text holds its special tokens already, a BOS must not be added).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence, TypeVar

from squeez_ray.http_retry import RetryPolicy
from squeez_ray.infer.generative import (ChunkJob, ContextOverflowError, Engine, Generation, GenerativePruner,
                                         checkpoint_context_length, load_tokenizer)

log = logging.getLogger(__name__)

DEFAULT_EXTRA_BODY = {"add_special_tokens": False}
DEFAULT_CONTEXT_TOKENS = 32768
T = TypeVar("T")


def api_base(server_url: str) -> str:
    """``http://host:port`` or ``http://host:port/v1`` -> the client's base URL (ending in /v1)."""
    url = server_url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


class OpenAIEngine(Engine):
    def __init__(self, server_url: str, *, server_model: str | None = None, api_key: str | None = None,
                 timeout_s: float = 60.0, max_retries: int = 3, max_concurrency: int = 8,
                 tokenizer_dir: str | None = None, max_context_tokens: int | None = None,
                 extra_body: dict[str, Any] | None = None):
        from openai import OpenAI

        self.client = OpenAI(base_url=api_base(server_url), api_key=api_key or os.environ.get("SQUEEZ_API_KEY") or "EMPTY",
                             timeout=timeout_s, max_retries=0)  # retries: self.retry
        self.retry = RetryPolicy(max_retries=max_retries, backoff_max_s=10.0)
        self._server_model = server_model
        self._context = max_context_tokens
        self.max_concurrency = max(1, max_concurrency)
        # engine kwargs add to the default, never replace it: without add_special_tokens=False the server
        # puts its own BOS before a prompt that already carries one (Gemma's <bos> twice)
        self.extra_body = {**DEFAULT_EXTRA_BODY, **(extra_body or {})}
        # A local tokenizer only counts tokens here (``self.tokenizer`` stays None: the engine base
        # class would otherwise treat it as the server's own).
        self._tokenizer_for_counting = load_tokenizer(tokenizer_dir) if tokenizer_dir else None
        if tokenizer_dir:
            self._context = self._context or checkpoint_context_length(tokenizer_dir)

    def count_tokens(self, text: str) -> int:
        if self._tokenizer_for_counting is None:
            return super().count_tokens(text)
        return len(self._tokenizer_for_counting.encode(text, add_special_tokens=False))

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        return [self.count_tokens(t) for t in texts]

    # Resolved on first use (inside the pruner's fail-open boundary), never at construction, so
    # building the backend does not need the server to be up.
    def _resolve(self) -> None:
        if self._server_model is not None and self._context is not None:
            return
        models = self._with_retries(lambda: list(self.client.models.list()))
        if not models and self._server_model is None:
            raise RuntimeError("the server lists no models; pass --server-model")
        chosen = next((m for m in models if m.id == self._server_model), models[0] if models else None)
        if self._server_model is None:
            self._server_model = chosen.id
        if self._context is None:
            self._context = int(getattr(chosen, "max_model_len", None) or DEFAULT_CONTEXT_TOKENS)  # vLLM reports it

    @property
    def model_name(self) -> str:  # type: ignore[override]
        return self._server_model or "openai"

    @property
    def max_context_tokens(self) -> int:  # type: ignore[override]
        self._resolve()
        return int(self._context)

    def _with_retries(self, call: Callable[[], T]) -> T:
        from openai import APIConnectionError, APIStatusError  # APITimeoutError is an APIConnectionError

        for attempt in range(self.retry.attempts):
            try:
                return call()
            except (APIConnectionError, APIStatusError) as error:
                status = error.status_code if isinstance(error, APIStatusError) else None
                if not self.retry.retryable(status) or attempt + 1 == self.retry.attempts:
                    raise
                headers = error.response.headers if isinstance(error, APIStatusError) else {}
                time.sleep(self.retry.delay(attempt, headers.get("retry-after")))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _one(self, job: ChunkJob) -> Generation:
        stop = {"stop": list(job.stop)} if job.stop else {}  # the family's stop strings (Gemma: plain-text markers)
        response = self._with_retries(lambda: self.client.completions.create(
            model=self.model_name, prompt=job.prompt, max_tokens=job.max_new_tokens, temperature=0.0,
            extra_body=self.extra_body or None, **stop))
        text = response.choices[0].text or ""
        usage = response.usage
        return Generation(text, getattr(usage, "prompt_tokens", 0) or 0, getattr(usage, "completion_tokens", 0) or 0)

    def _one_or_overflow(self, job: ChunkJob) -> Generation | None:
        from openai import BadRequestError

        try:
            return self._one(job)
        except BadRequestError as error:
            # vLLM, SGLang and OpenAI all say "context length" when a prompt is too long for the model.
            if "context length" in str(error).lower():
                return None
            raise

    def generate(self, jobs: Sequence[ChunkJob]) -> list[Generation]:
        if not jobs:
            return []
        self._resolve()
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(jobs))) as pool:
            generations = list(pool.map(self._one_or_overflow, jobs))
        if any(g is None for g in generations):
            # Our chars/4 estimate was short for these prompts: the pruner splits them and asks again.
            raise ContextOverflowError(f"{generations.count(None)} prompt(s) over the server's context", generations)
        return generations  # type: ignore[return-value]

    def close(self) -> None:
        self.client.close()


def build_openai(options: Any) -> GenerativePruner:
    if not options.server_url:
        raise ValueError("the openai backend needs --server-url (e.g. http://127.0.0.1:8000)")
    tokenizer_dir = None
    if options.model:  # optional: the served checkpoint's tokenizer (a folder or a hub id) counts tokens exactly
        from squeez_ray.hub import resolve_model

        local = resolve_model(options.model, what="--model")
        tokenizer_dir = local if Path(local, "tokenizer_config.json").is_file() else None
    extra = options.engine_kwargs if options.engine_kwargs else None
    engine = OpenAIEngine(options.server_url, server_model=options.server_model, api_key=options.api_key,
                          timeout_s=options.timeout_s, max_retries=options.max_retries,
                          max_concurrency=options.max_concurrency, tokenizer_dir=tokenizer_dir,
                          max_context_tokens=options.max_context_tokens, extra_body=extra)
    return GenerativePruner(engine, options, model_dir=tokenizer_dir)
