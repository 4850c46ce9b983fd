"""The openai backend's transport policy over real HTTP on 127.0.0.1 (a small stub server, no model):
retries with backoff on 429/5xx, bounded concurrency, and the completions request it sends (the
released prompt bytes, rendered by the pruner, never a server-side chat template)."""

from __future__ import annotations

import threading
import time

import pytest

from squeez_ray.infer.registry import build_pruner
from squeez_ray.prompt import DEFAULT_SYSTEM_PROMPT, render_prompt
from squeez_ray.infer.base import PruneRequest
from squeez_ray.testing.http import JsonHandler, LoopbackServer


class Stub:
    """Answers /v1/completions, failing the first ``failures`` calls with ``status``.

    ``max_chars`` bounds the tool output part of the prompt (a stand-in for the server's context)."""

    def __init__(self, failures: int = 0, status: int = 503, delay_s: float = 0.0, max_chars: int | None = None):
        self.failures, self.status, self.delay_s, self.max_chars = failures, status, delay_s, max_chars
        self.calls: list[dict] = []
        self.in_flight = self.peak = 0
        self.lock = threading.Lock()
        stub = self

        class Handler(JsonHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                body = self.read_json()
                body["path"] = self.path
                with stub.lock:
                    stub.calls.append(body)
                    failing = len(stub.calls) <= stub.failures
                    stub.in_flight += 1
                    stub.peak = max(stub.peak, stub.in_flight)
                time.sleep(stub.delay_s)
                with stub.lock:
                    stub.in_flight -= 1
                if failing:
                    self.send_json(stub.status, {"error": {"message": "busy", "type": "server_error"}})
                    return
                output = _tool_output(body["prompt"])
                if stub.max_chars and len(output) > stub.max_chars:  # vLLM's wording for an over-long prompt
                    self.send_json(400, {"error": {"message": "This model's maximum context length is 100 tokens.",
                                               "type": "BadRequestError", "code": 400}})
                    return
                line = output.split("\n")[0]  # echo the first line: a valid answer
                self.send_json(200, {
                    "id": "x", "object": "text_completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                 "text": f"<relevant_lines>\n{line}\n</relevant_lines>"}],
                    "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}})

        self.server = LoopbackServer(Handler)
        self.url = self.server.url

    def close(self):
        self.server.close()


def _tool_output(prompt: str) -> str:
    return prompt.split("<tool_output>\n", 1)[1].rsplit("\n</tool_output>", 1)[0]


@pytest.fixture
def stub(request):
    server = Stub(**getattr(request, "param", {}))
    yield server
    server.close()


@pytest.mark.parametrize("stub", [{"failures": 2, "status": 503}, {"failures": 1, "status": 429}], indirect=True)
def test_retries_then_succeeds(stub):
    pruner = build_pruner("openai", server_url=stub.url, server_model="m", max_context_tokens=4096, max_retries=3)
    result = pruner.prune("q", "first line\nsecond", fail_open=False)
    assert result.pruned and result.spans == [[1, 1]] and result.model == "m"
    assert len(stub.calls) == stub.failures + 1
    assert (result.input_tokens, result.output_tokens) == (11, 5)


@pytest.mark.parametrize("stub", [{"failures": 10, "status": 500}], indirect=True)
def test_gives_up_after_max_retries_and_fails_open(stub):
    pruner = build_pruner("openai", server_url=stub.url, server_model="m", max_context_tokens=4096, max_retries=1)
    result = pruner.prune("q", "first line\nsecond")
    assert not result.pruned and "InternalServerError" in result.reason
    assert len(stub.calls) == 2


@pytest.mark.parametrize("stub", [{"delay_s": 0.2}], indirect=True)
def test_concurrency_is_bounded(stub):
    pruner = build_pruner("openai", server_url=stub.url, server_model="m", max_context_tokens=4096, max_concurrency=2)
    requests = [PruneRequest("q", f"line {i}\nother") for i in range(6)]
    results = pruner.prune_batch(requests, fail_open=False)
    assert [r.spans for r in results] == [[[1, 1]]] * 6
    assert stub.peak == 2


def test_request_is_a_greedy_completion_of_the_rendered_prompt(stub):
    pruner = build_pruner("openai", server_url=stub.url + "/v1/", server_model="m", max_context_tokens=4096)
    pruner.prune("which?", "a\nb", fail_open=False)
    body = stub.calls[0]
    assert body["path"] == "/v1/completions"
    assert body["model"] == "m" and body["temperature"] == 0.0
    assert body["add_special_tokens"] is False and "messages" not in body
    assert body["prompt"] == render_prompt("which?", "a\nb", DEFAULT_SYSTEM_PROMPT)
    assert "<query>\nwhich?\n</query>\n<tool_output>\na\nb\n</tool_output>" in body["prompt"]
    assert body["max_tokens"] == 1 + 32  # "a\nb" is one token at chars/4, plus the answer margin


def test_golden_rows_go_out_byte_for_byte(stub, golden_rows):
    for row in golden_rows:
        pruner = build_pruner("openai", server_url=stub.url, server_model="m", max_context_tokens=4096,
                              system_prompt=row["system_prompt"])
        pruner.prune(row["query"], row["tool_output"], fail_open=False)
        assert stub.calls[-1]["prompt"] == row["prompt"]


def test_building_needs_no_server():
    pruner = build_pruner("openai", server_url="http://127.0.0.1:9", max_retries=0, timeout_s=1)
    assert pruner.name == "openai"
    result = pruner.prune("q", "a\nb")
    assert not result.pruned and "APIConnectionError" in result.reason


@pytest.mark.parametrize("stub", [{"max_chars": 400}], indirect=True)
def test_prompts_over_the_server_context_are_split_and_retried(stub):
    # chars/4 planned one chunk (the client thinks the context is large); the server disagrees.
    pruner = build_pruner("openai", server_url=stub.url, server_model="m", max_context_tokens=100000)
    output = "\n".join(f"line {i:03d} of a long log" for i in range(40))
    assert len(pruner.prepare([PruneRequest("q", output)]).jobs) == 1
    result = pruner.prune("q", output, fail_open=False)
    assert result.pruned and result.reason.startswith("chunked into ")
    n_chunks = int(result.reason.split()[2])
    assert n_chunks >= 2 and result.spans[0] == [1, 1] and result.kept_lines == n_chunks  # one echoed line per chunk
    accepted = [c for c in stub.calls if len(_tool_output(c["prompt"])) <= 400]
    assert len(accepted) == n_chunks
