"""The Serve app's request layer without Ray: configs, body validation, the auth / size guard, and the
``server`` client's retries against a real loopback HTTP server (stdlib), all in seconds."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from squeez_ray.config import ConfigError
from squeez_ray.serve.api import BatchBody, PruneBody
from squeez_ray.serve.config import MODEL_ENV, load_app_config
from squeez_ray.serve.guard import GuardSettings, RequestGuard
from squeez_ray.testing.http import JsonHandler, LoopbackServer

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted((REPO / "serve_configs").glob("*.yaml"))


# -- shipped configs --------------------------------------------------------------------------

def test_configs_are_shipped():
    assert {p.name for p in CONFIGS} >= {"pruner_gpu.yaml", "pruner_cpu.yaml", "baseline.yaml"}


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_config_opens_with_its_command_and_loads(path, monkeypatch):
    from ray.serve.schema import ServeDeploySchema

    monkeypatch.delenv(MODEL_ENV, raising=False)
    text = path.read_text()
    first = text.splitlines()[0]
    assert first.startswith("# ") and ("serve run" in first or "serve deploy" in first)
    assert f"serve_configs/{path.name}" in first
    doc = yaml.safe_load(text)
    ServeDeploySchema.model_validate(doc)  # what `serve run` / `serve deploy` check first
    assert doc["http_options"]["host"] == "127.0.0.1"  # loopback unless the user opens it
    [application] = doc["applications"]
    assert application["import_path"] == "squeez_ray.serve.app:build_app"
    load_app_config(application["args"])  # our own args: every key known, every value checked


def test_config_errors_name_every_bad_key_at_once(monkeypatch):
    monkeypatch.delenv(MODEL_ENV, raising=False)
    with pytest.raises(ConfigError) as error:
        load_app_config({"backend": "nope", "limits": {"max_request_bytes": 0, "request_timeout": 3},
                         "pruner": {"keep_ratio": 0.2, "colour": "red"}, "unknown": 1})
    message = str(error.value)
    for expected in ("backend: 'nope' is not a backend", "limits.max_request_bytes: 0 must be >= 1",
                     "limits.request_timeout: unknown key", "pruner.colour: unknown option", "unknown: unknown key"):
        assert expected in message


def test_model_backend_needs_a_model_and_the_env_var_supplies_it(monkeypatch):
    monkeypatch.delenv(MODEL_ENV, raising=False)
    with pytest.raises(ConfigError, match=f"needs a checkpoint directory .*{MODEL_ENV}"):
        load_app_config({"backend": "vllm"})
    monkeypatch.setenv(MODEL_ENV, "/models/x")
    config = load_app_config({"backend": "vllm", "model": "/elsewhere"})
    assert config.resolved_model() == "/models/x"  # the variable wins over args.model
    with pytest.raises(ConfigError, match="engine_kwargs.model: set it with model"):
        load_app_config({"backend": "vllm", "engine_kwargs": {"model": "/m"}})
    # The model backend's pruning replicas are the model's: their options go in model_deployment.
    with pytest.raises(ConfigError, match="pruner_deployment: backend 'vllm' prunes in its model replicas"):
        load_app_config({"backend": "vllm", "pruner_deployment": {"num_replicas": 2}})


# -- bodies -----------------------------------------------------------------------------------

def test_prune_body_accepts_text_and_options():
    body = PruneBody.model_validate({"query": "why", "tool_output": "a\r\nb\n\tc", "options": {"markers": True}})
    assert body.tool_output == "a\r\nb\n\tc" and body.options.markers is True
    knobs = PruneBody.model_validate({"query": "why", "tool_output": "x", "recall_target": 0.8, "max_kept_lines": 5})
    assert (knobs.recall_target, knobs.max_kept_lines) == (0.8, 5)


@pytest.mark.parametrize("payload, where", [
    ({"query": "", "tool_output": "x"}, "query"),
    ({"query": " \n\t", "tool_output": "x"}, "query"),
    ({"query": 3, "tool_output": "x"}, "query"),
    ({"query": "q", "tool_output": b"x"}, "tool_output"),
    ({"query": "q", "tool_output": {"lines": []}}, "tool_output"),
    ({"query": "q", "tool_output": "a\x00b"}, "tool_output"),
    ({"query": "q", "tool_output": "x", "options": {"line_numbers": 1}}, "options"),
    ({"query": "q", "tool_output": "x", "recall_target": 0}, "recall_target"),
    ({"query": "q", "tool_output": "x", "recall_target": 1.5}, "recall_target"),
    ({"query": "q", "tool_output": "x", "recall_target": "high"}, "recall_target"),
    ({"query": "q", "tool_output": "x", "max_kept_lines": 0}, "max_kept_lines"),
])
def test_prune_body_rejects(payload, where):
    with pytest.raises(ValidationError) as error:
        PruneBody.model_validate(payload)
    assert error.value.errors()[0]["loc"][0] == where


def test_batch_body_needs_items():
    with pytest.raises(ValidationError):
        BatchBody.model_validate({"items": []})
    assert len(BatchBody.model_validate({"items": [{"query": "q", "tool_output": "x"}]}).items) == 1


# -- guard (ASGI, driven directly) ------------------------------------------------------------

def run_guard(settings: GuardSettings, *, path="/v1/prune", root_path="", method="POST", headers=(),
              body_chunks=(b"{}",)):
    seen: dict = {}

    async def app(scope, receive, send):
        message = await receive()
        seen["body"] = message["body"]
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    chunks = list(body_chunks)
    sent: list = []

    async def receive():
        if chunks:
            chunk = chunks.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "path": path, "root_path": root_path, "method": method,
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers]}
    asyncio.run(RequestGuard(app, lambda: settings)(scope, receive, send))
    status = sent[0]["status"]
    payload = sent[1]["body"]
    return status, (json.loads(payload) if status != 200 else payload), seen, dict(sent[0]["headers"])


def test_guard_passes_a_small_body_through_whole():
    status, _, seen, _ = run_guard(GuardSettings(max_request_bytes=10), body_chunks=[b"ab", b"cd", b"ef"])
    assert status == 200 and seen["body"] == b"abcdef"


def test_guard_413_on_declared_or_streamed_size():
    declared = run_guard(GuardSettings(max_request_bytes=10), headers=[("Content-Length", "11")])
    assert declared[0] == 413 and declared[1]["error"]["type"] == "too_large"
    streamed = run_guard(GuardSettings(max_request_bytes=10), body_chunks=[b"123456", b"789012"])
    assert streamed[0] == 413 and "limit of 10 bytes" in streamed[1]["error"]["message"]


def test_guard_401_unless_the_bearer_token_matches():
    settings = GuardSettings(token="s3cret")
    status, payload, _, headers = run_guard(settings)
    assert status == 401 and headers[b"www-authenticate"] == b"Bearer" and payload["error"]["code"] == 401
    assert run_guard(settings, headers=[("Authorization", "Bearer wrong")])[0] == 401
    assert run_guard(settings, headers=[("Authorization", "Basic s3cret")])[0] == 401
    assert run_guard(settings, headers=[("Authorization", "Bearer s3cret")])[0] == 200
    assert run_guard(settings, path="/healthz", method="GET")[0] == 200  # probes need no token
    # Under a Serve route prefix the open paths stay open, the others closed.
    assert run_guard(settings, path="/auth/healthz", root_path="/auth", method="GET")[0] == 200
    assert run_guard(settings, path="/auth/v1/prune", root_path="/auth")[0] == 401


# -- server client against a loopback HTTP server ---------------------------------------------

class ScriptedServer:
    """Answers POSTs from a script of (status, headers, body) and records what it received."""

    def __init__(self, script: list[tuple[int, dict, dict]]):
        self.script = list(script)
        self.received: list[dict] = []
        owner = self

        class Handler(JsonHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                owner.received.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                       "body": self.read_json()})
                status, headers, body = owner.script.pop(0) if len(owner.script) > 1 else owner.script[0]
                self.send_json(status, body, headers)

        self.server = LoopbackServer(Handler)
        self.url = self.server.url

    def close(self):
        self.server.close()


def ok_body(n: int) -> dict:
    return {"results": [{"spans": [[1, 1]], "text": "a", "kept_lines": 1, "total_lines": 2, "compression": 0.5,
                         "pruned": True, "reason": None, "model": "m", "latency_ms": 1.0, "input_tokens": 0,
                         "output_tokens": 0, "unmatched_lines": 0}] * n, "latency_ms": 2.0}


def test_server_client_retries_503_then_answers():
    from squeez_ray.infer.registry import build_pruner

    server = ScriptedServer([(503, {"Retry-After": "0"}, {"error": {"message": "full"}}), (200, {}, ok_body(1))])
    try:
        client = build_pruner("server", server_url=server.url + "/v1", api_key="k", max_retries=2)
        result = client.prune("q", "a\nb", fail_open=False)
    finally:
        server.close()
    assert result.pruned and result.spans == [[1, 1]] and result.model == "m"
    assert len(server.received) == 2 and server.received[0]["path"] == "/v1/prune/batch"
    assert server.received[0]["auth"] == "Bearer k"
    assert server.received[0]["body"]["items"] == [{"query": "q", "tool_output": "a\nb", "tool_type": None}]


def test_server_client_does_not_retry_a_4xx_and_batches_requests():
    from squeez_ray.infer.registry import build_pruner
    from squeez_ray.infer.base import PruneRequest
    from squeez_ray.infer.server_client import ServerError

    server = ScriptedServer([(422, {}, {"error": {"message": "query: query is empty"}})])
    try:
        client = build_pruner("server", server_url=server.url, max_retries=3)
        with pytest.raises(ServerError, match="422: query: query is empty"):
            client.prune(" ", "a", fail_open=False)
        assert len(server.received) == 1
    finally:
        server.close()
    server = ScriptedServer([(200, {}, ok_body(2))])
    try:
        client = build_pruner("server", server_url=server.url, batch_size=2, max_concurrency=2)
        results = client.prune_batch([PruneRequest("q", "a\nb")] * 4, fail_open=False)
    finally:
        server.close()
    assert len(results) == 4 and sorted(len(r["body"]["items"]) for r in server.received) == [2, 2]


def test_server_client_rejects_a_malformed_answer():
    from squeez_ray.infer.registry import build_pruner
    from squeez_ray.infer.server_client import ServerError

    server = ScriptedServer([(200, {}, {"results": []})])
    try:
        client = build_pruner("server", server_url=server.url)
        with pytest.raises(ServerError, match="0 results for 1 items"):
            client.prune("q", "a", fail_open=False)
        assert client.prune("q", "a").pruned is False  # fail-open by default
    finally:
        server.close()


def test_lone_surrogates_become_replacement_characters_per_item():
    """What json.loads gives FastAPI for "\\ud800": a str no UTF-8 answer can carry (issue #15)."""
    raw = '{"items": [{"query": "q\\udfff", "tool_output": "a\\ud800\\nb"}, {"query": "q", "tool_output": "c\\nd"}]}'
    body = BatchBody.model_validate(json.loads(raw))
    assert body.items[0].query == "q\ufffd" and body.items[0].tool_output == "a\ufffd\nb"
    assert body.items[1].tool_output == "c\nd"
    single = PruneBody.model_validate(json.loads('{"query": "q", "tool_output": "x\\ud83d", "tool_type": "\\udc00"}'))
    assert single.tool_output == "x\ufffd" and single.tool_type == "\ufffd"
    single.model_dump_json()  # the answer side can serialise it


def test_the_schema_states_the_text_constraints():
    item = PruneBody.model_json_schema()["properties"]
    assert item["query"]["minLength"] == 1 and item["query"]["pattern"] == "\\S"
    assert "\\u0000" in item["tool_output"]["pattern"]


# -- the model replicas' pruning ----------------------------------------------------------------

def test_model_pruning_gates_short_outputs_as_every_pruner_does():
    """Serve's model path answers an output below min_lines with the same unpruned result as
    Pruner.prune_batch (one shared gate, Pruner.gate_short), and sends only the others to the model."""
    from types import SimpleNamespace

    from squeez_ray.infer.base import Pruner, PruneRequest, make_result
    from squeez_ray.serve.model_pruning import ModelPruning

    class Prompting(Pruner):  # what GenerativePruner.for_prompting gives ModelPruning, minus the tokenizer
        name, min_lines = "squeez-pruner", 5

        def prepare(self, requests):
            self.prepared = list(requests)
            return SimpleNamespace(jobs=[SimpleNamespace(prompt=r.query, max_new_tokens=8, stop=()) for r in requests])

        def assemble(self, prepared, generations, render_options):
            return [make_result(r.tool_output, [(1, 1)], model=self.name) for r in self.prepared]

    prompted = []

    async def complete(prompt, max_tokens, stop):
        prompted.append(prompt)
        return "1"

    pruning = ModelPruning.__new__(ModelPruning)
    pruning._pruner, pruning._max_calls, pruning.name = Prompting(), 2, "squeez-pruner"
    pruning._client = SimpleNamespace(complete=complete)
    short, long = PruneRequest("short", "a\nb"), PruneRequest("long", "\n".join("abcdefg"))
    served = asyncio.run(pruning.prune([short, long], render_options=None))
    assert prompted == ["long"] and served[1].pruned
    assert served[0] == Pruner.prune_batch(Prompting(), [short])[0]
    assert served[0].reason == "below min_lines=5" and not served[0].pruned
