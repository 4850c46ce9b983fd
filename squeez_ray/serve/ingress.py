"""The pruning API: a FastAPI ingress deployment (``/v1/prune``, ``/v1/prune/batch``, ``/healthz``,
and the model's OpenAI-compatible ``/v1/chat/completions``, ``/v1/completions``, ``/v1/models``).

Status codes an agent loop can rely on:

- 200: an answer. A timeout or a backend error is still 200, with the whole output and
  ``pruned: false`` plus a ``reason`` (DESIGN.md's fail-open: the agent always gets its output).
- 401 missing/wrong bearer token (only when one is configured), 413 over the size or batch limit,
  422 bad input (invalid JSON, missing or empty query, non-text tool output), each with a message.
- 503 with ``Retry-After`` when queues are full (Serve's BackPressureError, from the API's own queue
  or the model replicas' queue): the caller backs off or passes the output through itself.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any, Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from ray import serve
from starlette.exceptions import HTTPException as StarletteHTTPException

from squeez_ray.infer.base import PruneRequest, PruneResult, RenderOptions, unpruned_result
from squeez_ray.serve.api import (ERROR_RESPONSES, NOT_FOUND, BatchAnswer, BatchBody, Health, PruneAnswer,
                                  PruneBody, PruneOptions, openapi_with_limits)
from squeez_ray.serve.config import MODEL_BACKEND, ServeAppConfig
from squeez_ray.serve.guard import GuardSettings, RequestGuard

log = logging.getLogger("squeez_ray.serve")

app = FastAPI(
    title="squeez pruning API",
    version="1",
    description="Task-conditioned tool-output pruning: send a query and one raw tool output, get back the "
                "verbatim line spans worth reading. Fail-open: a timeout or backend error answers 200 with the "
                "whole output and pruned=false. Bearer-token auth when the service was started with "
                "SQUEEZ_SERVE_TOKEN.")

# One API replica per process: the replica sets these when it starts; the middleware reads them.
_guard_settings = GuardSettings()
app.add_middleware(RequestGuard, settings=lambda: _guard_settings)


class Overloaded(Exception):
    def __init__(self, message: str, retry_after_s: int):
        super().__init__(message)
        self.retry_after_s = retry_after_s


def _error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": status, "message": message, "type": kind}}, status_code=status,
                        headers=headers)


@app.exception_handler(RequestValidationError)
async def _invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item.get("loc", ()) if part != "body") or "body"
        if item.get("type") == "json_invalid":
            problems.append(f"the body is not valid JSON ({item.get('ctx', {}).get('error', 'parse error')})")
        else:
            problems.append(f"{where}: {str(item.get('msg', 'invalid')).removeprefix('Value error, ')}")
    return _error(422, "invalid_request", "; ".join(problems) or "invalid request")


@app.exception_handler(StarletteHTTPException)
async def _http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
    if error.status_code == 400:  # FastAPI's "error parsing the body": the JSON is not text it can read
        return _error(422, "invalid_request", await _unreadable_body(request))
    kinds = {404: "not_found", 405: "not_found", 413: "too_large", 401: "unauthorized"}
    return _error(error.status_code, kinds.get(error.status_code, "invalid_request"), str(error.detail),
                  getattr(error, "headers", None))


async def _unreadable_body(request: Request) -> str:
    """Why FastAPI could not read a JSON body (it says only 400 "error parsing the body")."""
    body = await request.body()
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as error:
        return f"the body is not valid UTF-8 (byte {error.start}: {error.reason}); send JSON as UTF-8 text"
    return "the body is JSON nested too deeply to read (arrays or objects inside each other over ~1000 levels)"


@app.exception_handler(Exception)
async def _unexpected(request: Request, error: Exception) -> JSONResponse:
    # Only bugs land here (pruning errors fail open in PruneIngress._run); say so without a traceback.
    log.exception("unexpected error on %s", request.url.path)
    return _error(500, "internal", f"internal error: {type(error).__name__}; see the service log")


@app.exception_handler(Overloaded)
async def _overloaded(request: Request, error: Overloaded) -> JSONResponse:
    return _error(503, "overloaded", str(error), {"Retry-After": str(error.retry_after_s)})


def _render_options(options: PruneOptions | None) -> RenderOptions:
    return RenderOptions(line_numbers=options.line_numbers, markers=options.markers) if options else RenderOptions()


def _answer(result: PruneResult, latency_ms: float | None = None) -> dict[str, Any]:
    out = result.to_dict()
    if latency_ms is not None:
        out["latency_ms"] = round(latency_ms, 3)
    return out


def _failure_reason(error: Exception) -> str:
    """The fail-open ``reason`` for a pruner call that raised: one line, no remote traceback."""
    from ray.exceptions import RayActorError, RayTaskError
    from ray.serve.exceptions import ReplicaUnavailableError

    if isinstance(error, (RayActorError, ReplicaUnavailableError)):
        # kill -9 or out of memory: Serve starts a new replica within seconds; until then, fail open.
        return f"backend error: the pruner replica died or is unreachable ({type(error).__name__}); retry later"
    if isinstance(error, RayTaskError) and error.cause is not None:  # the pruner's own error, unwrapped
        error = error.cause
    first_line = (str(error).strip().splitlines() or [""])[0]
    return f"backend error: {type(error).__name__}: {first_line}"


def _openai_router(model_id: str, llm_server: Any, model_card: Any) -> Any:
    """ray.serve.llm's OpenAI router object, used as a library (its methods, not its deployment)."""
    from ray.serve.llm.ingress import OpenAiIngress

    return OpenAiIngress(llm_deployments={model_id: llm_server}, model_cards={model_id: model_card})


# Serve ships this class to the replicas by value: every module-level name its methods use must be
# defined above it.
@serve.deployment
@serve.ingress(app)
class PruneIngress:
    """The API replica: validates, bounds, and calls the pruner replicas (the model's or the local
    pruner's deployment), answering fail-open when they time out, fail or die."""

    def __init__(self, config: ServeAppConfig, worker: Any, model_card: Any = None):
        """``worker``: a handle to the replicas that prune (ray.serve.llm's LLMServer for the model
        backend, else squeez_ray.serve.local_pruning.LocalPruner); ``model_card`` for the model's routes."""
        global _guard_settings
        self._config = config
        self._limits = config.limits
        token = os.environ.get(config.auth_token_env) or None
        _guard_settings = GuardSettings(token=token, max_request_bytes=config.limits.max_request_bytes,
                                        body_timeout_s=config.limits.body_timeout_s)
        openapi_with_limits(app, config.limits.max_batch_items, config.limits.max_request_bytes)
        if config.backend == MODEL_BACKEND:
            from squeez_ray.serve.model_pruning import ModelPruning

            self._pruning: Any = ModelPruning(config, worker)
            self._openai = _openai_router(config.model_id, worker, model_card)
            self._model_name = config.model_id
        else:
            from squeez_ray.serve.local_pruning import LocalPruning

            self._pruning = LocalPruning(config, worker)
            self._openai = None
            self._model_name = None
        log.info("squeez API replica ready: backend=%s auth=%s", config.backend, "on" if token else "off")

    async def _run(self, requests: Sequence[PruneRequest], render_options: RenderOptions) -> list[PruneResult]:
        """Prune with the per-request timeout; fail open on timeout or error, 503 on backpressure."""
        from ray.serve.exceptions import BackPressureError

        timeout = self._limits.request_timeout_s
        try:
            return await asyncio.wait_for(self._pruning.prune(requests, render_options), timeout)
        except BackPressureError as error:
            raise Overloaded(f"the pruning service is at capacity ({error}); retry later",
                             self._limits.retry_after_s) from None
        except asyncio.TimeoutError:
            log.warning("pruning %d output(s) timed out after %ss; answering unpruned", len(requests), timeout)
            return [unpruned_result(r.tool_output, f"timeout after {timeout:g}s", model=self._pruning.name)
                    for r in requests]
        except Exception as error:  # the fail-open boundary: the agent gets its output, the log gets the error
            log.exception("pruning %d output(s) failed; answering unpruned", len(requests))
            return [unpruned_result(r.tool_output, _failure_reason(error), model=self._pruning.name)
                    for r in requests]

    @app.post("/v1/prune", response_model=PruneAnswer, responses=ERROR_RESPONSES,
              summary="Prune one tool output")
    async def prune(self, body: PruneBody) -> dict[str, Any]:
        started = time.perf_counter()
        request = PruneRequest(body.query, body.tool_output, body.tool_type, body.recall_target, body.max_kept_lines)
        [result] = await self._run([request], _render_options(body.options))
        return _answer(result, (time.perf_counter() - started) * 1000)

    @app.post("/v1/prune/batch", response_model=BatchAnswer, responses=ERROR_RESPONSES,
              summary="Prune many tool outputs (answers in request order)")
    async def prune_batch(self, body: BatchBody) -> dict[str, Any]:
        started = time.perf_counter()
        if len(body.items) > self._limits.max_batch_items:
            return _error(413, "too_large", f"batch has {len(body.items)} items; the limit is "
                          f"{self._limits.max_batch_items} (split it)")
        requests = [PruneRequest(item.query, item.tool_output, item.tool_type, item.recall_target, item.max_kept_lines)
                    for item in body.items]
        results = await self._run(requests, _render_options(body.options))
        return {"results": [_answer(r) for r in results], "latency_ms": round((time.perf_counter() - started) * 1000, 3)}

    @app.get("/healthz", response_model=Health, summary="Liveness of the API replica")
    async def healthz(self) -> dict[str, Any]:
        stats = getattr(self._pruning, "batch_stats", None)
        return {"status": "ok", "backend": self._config.backend, "model": self._model_name,
                "batching": await stats() if stats else None}

    @app.get("/v1/models", summary="OpenAI-compatible: the served model (model backends)")
    async def models(self) -> Any:
        if self._openai is None:
            return {"object": "list", "data": []}
        return await self._openai.models()

    @app.post("/v1/chat/completions", responses=ERROR_RESPONSES | NOT_FOUND,
              summary="OpenAI-compatible chat completions of the underlying model (vLLM)")
    async def chat(self, request: Request) -> Any:
        return await self._openai_call(request, "chat")

    @app.post("/v1/completions", responses=ERROR_RESPONSES | NOT_FOUND,
              summary="OpenAI-compatible text completions of the underlying model (vLLM)")
    async def completions(self, request: Request) -> Any:
        return await self._openai_call(request, "completions")

    async def _openai_call(self, request: Request, method: str) -> Any:
        """Hand the request to ray.serve.llm's own OpenAI router, so the route behaves as theirs does."""
        if self._openai is None:
            return _error(404, "not_found", f"this service runs the {self._config.backend!r} backend: no model "
                          "serves OpenAI requests here")
        import pydantic
        from ray.serve.exceptions import BackPressureError
        from ray.serve.llm.openai_api_models import ChatCompletionRequest, CompletionRequest

        body_cls = ChatCompletionRequest if method == "chat" else CompletionRequest
        try:
            body = body_cls.model_validate_json(await request.body())
        except pydantic.ValidationError as error:
            return _error(422, "invalid_request", "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in error.errors()))
        try:
            return await getattr(self._openai, method)(body, request)
        except BackPressureError as error:
            raise Overloaded(f"the model is at capacity ({error}); retry later", self._limits.retry_after_s) from None
        except Exception as error:
            status = getattr(error, "status_code", None)
            if isinstance(status, int):  # OpenAIHTTPException from ray.serve.llm's router
                return _error(status, "invalid_request" if status < 500 else "internal",
                              getattr(error, "message", str(error)))
            raise
