"""Teacher engines as Ray Data transforms: a dataset with ``teacher_request`` (JSON chat messages)
in, the same rows with ``teacher_reply`` / ``teacher_error`` out. Rows with an empty request pass
through untouched.

HTTP: a ``map_batches`` actor around :class:`~squeez_ray.label.http_client.ChatClient` rather than
``ray.data.llm.HttpRequestProcessorConfig``. Ray 2.60's HTTP stage retries only 408/429/502-504
(a 500 body is handed on as if it were the reply, a non-JSON one fails the batch), sends every
request of a batch at once (``qps`` paces starts but does not bound what is in flight), has no
request budget, and raises for the whole job when one row runs out of retries. Labelling needs the
opposite on each point, and a per-row error we can count.

vLLM: :mod:`squeez_ray.label.vllm_teacher` (its config is here): engines kept as Ray actors for every
round of a run, rather than ``ray.data.llm``'s processor, which starts an engine per pass (per round).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from squeez_ray.label.http_client import ChatClient, ChatSettings, LocalBudget

PROMPT_TOO_LONG = "prompt_too_long"  # the engine refused the prompt: over max_model_len (final: it stays too long)
ENGINE_ERROR = "engine_error"  # any other per-row engine failure (left for a rerun)

Engine = Callable[[Any], Any]  # ray.data.Dataset -> ray.data.Dataset


@dataclass
class HttpTeacherConfig:
    url: str = "http://127.0.0.1:8000/v1"  # base URL of the OpenAI-compatible server (…/v1)
    model: str = "openai/gpt-oss-120b"  # model name the server serves
    api_key_env: str = "SQUEEZ_TEACHER_API_KEY"  # the key is read from this variable, never from YAML
    max_concurrency: int = 8  # requests in flight across all actors
    num_actors: int = 1  # Ray actors sending requests
    batch_size: int = 32  # rows per actor call
    max_retries: int = 4  # retries per request on timeouts, 429 and 5xx
    backoff_base_s: float = 1.0  # first retry delay; doubles each retry, with jitter
    backoff_max_s: float = 30.0  # longest retry delay
    timeout_s: float = 120.0  # seconds per request
    request_budget: int | None = None  # total HTTP attempts for the run (retries included); None: unlimited
    temperature: float = 0.0  # sampling temperature of the teacher
    max_tokens: int = 1024  # reply budget per request
    json_mode: bool = False  # ask for response_format json_object
    json_schema: bool = False  # constrain replies with each stage's JSON schema (servers with structured outputs)
    extra_body: dict[str, Any] = field(default_factory=dict)  # extra fields merged into each request body

    def validate(self) -> list[str]:
        problems = []
        if not self.url.startswith(("http://", "https://")):
            problems.append(f"url: {self.url!r} is not an http(s) URL")
        for name in ("max_concurrency", "num_actors", "batch_size"):
            if getattr(self, name) < 1:
                problems.append(f"{name}: must be >= 1, got {getattr(self, name)}")
        if self.request_budget is not None and self.request_budget < 1:
            problems.append(f"request_budget: must be >= 1 or null, got {self.request_budget}")
        return problems

    def chat_settings(self, api_key: str | None) -> ChatSettings:
        per_actor = -(-self.max_concurrency // self.num_actors)
        return ChatSettings(url=self.url, model=self.model, api_key=api_key, max_concurrency=per_actor,
                            max_retries=self.max_retries, backoff_base_s=self.backoff_base_s,
                            backoff_max_s=self.backoff_max_s, timeout_s=self.timeout_s, temperature=self.temperature,
                            max_tokens=self.max_tokens, json_mode=self.json_mode, json_schema=self.json_schema,
                            extra_body=self.extra_body or None)


@dataclass
class VllmTeacherConfig:
    model: str = ""  # a local checkpoint directory or a model id the cluster can load
    engine_kwargs: dict[str, Any] = field(default_factory=dict)  # passed through to vLLM
    batch_size: int = 16  # rows per engine batch
    concurrency: int = 1  # engines (Ray actors), kept for every round of the run
    # CPU nodes: the CPUs each engine actor takes. Null on GPU nodes (each takes tensor_parallel_size GPUs).
    cpu_bundle: float | None = None
    stage_num_cpus: float = 0.1  # the Ray Data tasks that send each round's batches to the engines
    temperature: float = 0.0  # sampling temperature of the teacher
    max_tokens: int = 1024  # reply budget per request
    structured_outputs: bool = True  # constrain replies to each stage's JSON schema (xgrammar / guidance)


# ----------------------------------------------------------------------------------------- HTTP


class _RayBudget:
    def __init__(self, handle: Any):
        self.handle = handle

    async def take(self) -> bool:
        return await self.handle.take.remote()


def make_budget_actor(total: int | None) -> Any:
    """One counter for all HTTP actors of a run, so the budget holds however many actors there are."""
    import ray

    @ray.remote(num_cpus=0)
    class RequestBudget:
        def __init__(self, total: int | None):
            self.left, self.used = total, 0

        def take(self) -> bool:
            if self.left is not None:
                if self.left <= 0:
                    return False
                self.left -= 1
            self.used += 1
            return True

        def spent(self) -> int:
            return self.used

    return RequestBudget.options(name=f"squeez-teacher-budget-{uuid.uuid4().hex[:8]}").remote(total)


class HttpChatUDF:
    """Ray Data actor: one bounded client per batch call; ``asyncio.run`` gives each call its own loop."""

    def __init__(self, settings: dict[str, Any], budget: Any = None):
        self.settings = ChatSettings(**settings)
        self.budget = budget

    def __call__(self, batch: Any) -> Any:
        requests = list(batch["teacher_request"])
        outcomes = asyncio.run(self._run(requests))
        batch["teacher_reply"] = [o.reply or "" if o else "" for o in outcomes]
        batch["teacher_error"] = [o.error or "" if o else "" for o in outcomes]
        batch["teacher_error_detail"] = [o.detail if o else "" for o in outcomes]
        batch["teacher_requests"] = [int(n) + (o.attempts if o else 0)
                                     for n, o in zip(batch["teacher_requests"], outcomes)]
        return batch

    async def _run(self, requests: list[str]) -> list[Any]:
        budget = _RayBudget(self.budget) if self.budget is not None else LocalBudget(None)
        async with ChatClient(self.settings, budget) as client:
            async def one(request: str):
                return await client.chat(json.loads(request)) if request else None

            return await asyncio.gather(*(one(r) for r in requests))


def http_engine(config: HttpTeacherConfig, api_key: str | None, budget: Any = None) -> Engine:
    settings = asdict(config.chat_settings(api_key))

    def run(ds: Any) -> Any:
        return ds.map_batches(HttpChatUDF, fn_constructor_kwargs={"settings": settings, "budget": budget},
                              batch_size=config.batch_size, batch_format="pandas", concurrency=config.num_actors,
                              num_cpus=0.25)  # I/O-bound: a quarter CPU leaves the node to the rest
    return run
