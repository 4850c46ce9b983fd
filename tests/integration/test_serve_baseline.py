"""The pruning API on a real Serve (loopback HTTP) with the BM25 backend: every status code and limit.

BM25 needs no model, so these run in seconds; the same ingress serves the model
(test_serve_model.py). Run under the heavy lock:
``flock /tmp/squeez-heavy.lock .venv/bin/python -m pytest tests/integration/test_serve_baseline.py``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from squeez_ray.infer.registry import build_pruner
from squeez_ray.infer.base import PruneRequest, RenderOptions
from squeez_ray.testing.http import free_port

TOKEN = "test-token-5f2c"
SQUEEZ = Path(sys.executable).parent / "squeez"



def make_log(n: int = 60, failed: int = 25) -> str:
    lines = [f"tests/test_mod_{i}.py::test_case_{i} PASSED" for i in range(1, n + 1)]
    lines[failed - 1] = f"tests/test_mod_{failed}.py::test_case_{failed} FAILED - AssertionError: expected 504"
    return "\n".join(lines)


def check_answer(answer: dict, tool_output: str) -> list[str]:
    """The contract of every answer: spans inside the input, text = those source lines verbatim."""
    source = tool_output.split("\n")
    assert answer["total_lines"] == len(source)
    spans = answer["spans"]
    assert all(1 <= s <= e <= len(source) for s, e in spans)
    assert spans == sorted(spans)
    kept = [source[n - 1] for s, e in spans for n in range(s, e + 1)]
    assert answer["kept_lines"] == len(kept)
    assert answer["compression"] == pytest.approx(1 - len(kept) / len(source), abs=1e-6)
    if answer["pruned"]:
        assert answer["text"] == "\n".join(kept)
    else:
        assert answer["text"] == tool_output and answer["reason"]
    return kept


@pytest.fixture(scope="module")
def base_url(ray_local):
    from ray import serve

    from squeez_ray.serve.app import build_app

    port = free_port()
    serve.shutdown()  # a Serve left by another module would ignore these http_options
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    small = {"ray_actor_options": {"num_cpus": 0.1}}
    pruner = {"pruner_deployment": small}  # each app's BM25 replica behind its API replica
    apps = {
        "open": {"backend": "bm25", "ingress_deployment": small, **pruner,
                 "limits": {"max_request_bytes": 100_000, "max_batch_items": 3}},
        "auth": {"backend": "bm25", **pruner, "ingress_deployment": {
            "ray_actor_options": {"num_cpus": 0.1, "runtime_env": {"env_vars": {"SQUEEZ_SERVE_TOKEN": TOKEN}}}}},
        # A budget no pruner meets on a 40,000-line output: the timeout path, deterministically.
        "slow": {"backend": "bm25", "ingress_deployment": small, **pruner, "limits": {"request_timeout_s": 0.001}},
        # One request at a time and one queued: a burst overflows the API's own queue (Serve's proxy answers).
        "tight": {"backend": "bm25", **pruner, "ingress_deployment": {
            "num_replicas": 1, "max_ongoing_requests": 1, "max_queued_requests": 1,
            "ray_actor_options": {"num_cpus": 0.1}}},
        # Two requests at a time and a 1 s body deadline: slow-body clients must not hold both slots.
        "slowbody": {"backend": "bm25", **pruner, "limits": {"body_timeout_s": 1}, "ingress_deployment": {
            "num_replicas": 1, "max_ongoing_requests": 2, "ray_actor_options": {"num_cpus": 0.1}}},
    }
    # All at once: their ten replicas start side by side instead of one app after another.
    serve.run_many([serve.RunTarget(build_app(args), name=name, route_prefix="/" if name == "open" else f"/{name}")
                    for name, args in apps.items()])
    yield f"http://127.0.0.1:{port}"
    for name in ("open", "auth", "slow", "tight", "slowbody"):
        serve.delete(name)
    serve.shutdown()


def post(url: str, body=None, **kwargs) -> requests.Response:
    return requests.post(url, json=body, **{"timeout": 120, **kwargs})


def error_message(response: requests.Response) -> str:
    payload = response.json()
    assert set(payload) == {"error"} and payload["error"]["code"] == response.status_code
    return payload["error"]["message"]


def test_prune_round_trip_keeps_source_lines_only(base_url):
    log = make_log()
    response = post(f"{base_url}/v1/prune", {"query": "which test FAILED with AssertionError", "tool_output": log})
    assert response.status_code == 200, response.text
    answer = response.json()
    kept = check_answer(answer, log)
    assert answer["pruned"] is True and answer["model"] == "bm25"
    assert any("FAILED" in line for line in kept)  # BM25 ranks the one line holding the query words first
    assert answer["latency_ms"] > 0


def test_batch_answers_in_order_with_render_options(base_url):
    logs = [make_log(30, 3), make_log(45, 40), make_log(21, 7)]
    body = {"items": [{"query": "FAILED AssertionError", "tool_output": log} for log in logs],
            "options": {"line_numbers": True}}
    response = post(f"{base_url}/v1/prune/batch", body)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["total_lines"] for r in results] == [30, 45, 21]
    for result, log in zip(results, logs):
        source = log.split("\n")
        first = result["spans"][0][0]
        assert result["text"].split("\n")[0].endswith(f"{first}: {source[first - 1]}")


def test_answers_match_the_local_pruner(base_url):
    """The service adds nothing to the pruner's decision: same spans as BM25 called in-process."""
    log = make_log(80, 61)
    local = build_pruner("bm25").prune("test_case_61 FAILED", log)
    answer = post(f"{base_url}/v1/prune", {"query": "test_case_61 FAILED", "tool_output": log}).json()
    assert answer["spans"] == local.spans and answer["text"] == local.text


@pytest.mark.parametrize("body, raw, expected", [
    (None, b"{\"query\": \"x\", ", "not valid JSON"),
    ({"tool_output": "a\nb"}, None, "query: Field required"),
    ({"query": "   ", "tool_output": "a\nb"}, None, "query is empty"),
    ({"query": "x", "tool_output": 12345}, None, "tool_output: Input should be a valid string"),
    ({"query": "x", "tool_output": ["a", "b"]}, None, "tool_output: Input should be a valid string"),
    ({"query": "x", "tool_output": "a\u0000b"}, None, "NUL"),
    ({"query": "x"}, None, "tool_output: Field required"),
    ({"query": "x", "tool_output": "a", "extra": 1}, None, "extra: Extra inputs are not permitted"),
    ({"query": "x", "tool_output": "a", "options": {"markers": "yes"}}, None, "options.markers"),
    ([1, 2], None, "Input should be a valid dictionary"),
])
def test_bad_input_is_422_with_a_message(base_url, body, raw, expected):
    if raw is not None:
        response = requests.post(f"{base_url}/v1/prune", data=raw, headers={"Content-Type": "application/json"},
                                 timeout=60)
    else:
        response = post(f"{base_url}/v1/prune", body)
    assert response.status_code == 422, response.text
    assert expected in error_message(response)


def test_bad_batch_items_name_the_item(base_url):
    response = post(f"{base_url}/v1/prune/batch", {"items": [{"query": "x", "tool_output": "a"}, {"tool_output": "b"}]})
    assert response.status_code == 422
    assert "items.1.query: Field required" in error_message(response)
    empty = post(f"{base_url}/v1/prune/batch", {"items": []})
    assert empty.status_code == 422 and "items" in error_message(empty)


def test_over_the_size_limit_is_413(base_url):
    big = {"query": "x", "tool_output": "y" * 150_000}
    response = post(f"{base_url}/v1/prune", big)
    assert response.status_code == 413 and "100000 bytes" in error_message(response)
    # Chunked upload (no Content-Length): cut off at the limit all the same.
    payload = json.dumps(big).encode()
    chunked = requests.post(f"{base_url}/v1/prune", data=(payload[i:i + 8192] for i in range(0, len(payload), 8192)),
                            headers={"Content-Type": "application/json"}, timeout=60)
    assert chunked.status_code == 413
    too_many = post(f"{base_url}/v1/prune/batch", {"items": [{"query": "q", "tool_output": "a"}] * 4})
    assert too_many.status_code == 413 and "limit is 3" in error_message(too_many)


def test_bearer_token_required_when_configured(base_url):
    body = {"query": "FAILED", "tool_output": make_log()}
    missing = post(f"{base_url}/auth/v1/prune", body)
    assert missing.status_code == 401 and missing.headers["WWW-Authenticate"] == "Bearer"
    assert "bearer token" in error_message(missing)
    wrong = post(f"{base_url}/auth/v1/prune", body, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    right = post(f"{base_url}/auth/v1/prune", body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert right.status_code == 200 and right.json()["pruned"] is True
    assert requests.get(f"{base_url}/auth/healthz", timeout=30).status_code == 200  # probes need no token
    # Without a configured token the open app answers anyone.
    assert post(f"{base_url}/v1/prune", body).status_code == 200


def test_timeout_fails_open_with_the_whole_output(base_url):
    log = "\n".join(f"line {i} with some words to index" for i in range(40_000))
    response = post(f"{base_url}/slow/v1/prune", {"query": "words", "tool_output": log})
    assert response.status_code == 200
    answer = response.json()
    assert answer["pruned"] is False and answer["reason"].startswith("timeout after")
    check_answer(answer, log)


def test_full_queue_is_503_with_retry_after_and_service_recovers(base_url):
    log = "\n".join(f"line {i} with some words to index" for i in range(20_000))
    body = {"query": "words 17", "tool_output": log}
    with ThreadPoolExecutor(12) as pool:
        responses = list(pool.map(lambda _: post(f"{base_url}/tight/v1/prune", body), range(12)))
    codes = [r.status_code for r in responses]
    assert set(codes) <= {200, 503}, codes
    assert codes.count(503) >= 1 and codes.count(200) >= 1, codes
    rejected = next(r for r in responses if r.status_code == 503)
    assert int(rejected.headers["Retry-After"]) >= 1
    assert post(f"{base_url}/tight/v1/prune", body).status_code == 200


def test_health_docs_and_no_chat_without_a_model(base_url):
    health = requests.get(f"{base_url}/healthz", timeout=30).json()
    batching = health.pop("batching")  # requests gathered per pruner call (Serve request batching)
    assert health == {"status": "ok", "backend": "bm25", "model": None}
    assert batching["max_batch_size"] >= 1 and batching["batches"] <= batching["calls"]
    spec = requests.get(f"{base_url}/openapi.json", timeout=30).json()
    assert {"/v1/prune", "/v1/prune/batch", "/healthz", "/v1/chat/completions"} <= set(spec["paths"])
    body_schema = spec["components"]["schemas"]["PruneBody"]
    assert body_schema["properties"]["query"]["description"] and body_schema["examples"]
    assert "422" in spec["paths"]["/v1/prune"]["post"]["responses"]
    assert requests.get(f"{base_url}/docs", timeout=30).status_code == 200
    chat = post(f"{base_url}/v1/chat/completions", {"model": "x", "messages": [{"role": "user", "content": "hi"}]})
    assert chat.status_code == 404 and "bm25" in error_message(chat)


def test_server_backend_client(base_url):
    logs = [make_log(40, i) for i in (3, 17, 29, 33, 40)]
    requests_ = [PruneRequest("which test FAILED", log) for log in logs]
    client = build_pruner("server", server_url=base_url, batch_size=2, max_concurrency=2, timeout_s=60)
    results = client.prune_batch(requests_, render_options=RenderOptions(markers=True), fail_open=False)
    local = build_pruner("bm25").prune_batch(requests_, render_options=RenderOptions(markers=True))
    assert [r.spans for r in results] == [r.spans for r in local]
    assert [r.text for r in results] == [r.text for r in local]
    # A 4xx is the caller's mistake: raised with the server's message (or passed through when failing open).
    from squeez_ray.infer.server_client import ServerError

    with pytest.raises(ServerError, match="query is empty"):
        client.prune_batch([PruneRequest(" ", logs[0])], fail_open=False)
    passed = client.prune(" ", logs[0])
    assert passed.pruned is False and passed.text == logs[0]
    # Auth: the api_key option is sent as the bearer token.
    authed = build_pruner("server", server_url=f"{base_url}/auth", api_key=TOKEN).prune("FAILED", logs[1], fail_open=False)
    assert authed.pruned is True


def test_server_backend_retries_then_fails_open_when_nothing_listens():
    client = build_pruner("server", server_url=f"http://127.0.0.1:{free_port()}", max_retries=1, timeout_s=5)
    result = client.prune("q", "a\nb\nc")
    assert result.pruned is False and "ServerError" in result.reason and result.text == "a\nb\nc"


def test_squeez_cli_with_server_url(base_url, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SQUEEZ_", "XDG_"))}
    env.update(HOME=str(tmp_path / "home"), SQUEEZ_STORE=str(tmp_path / "store"))
    log = make_log(50, 12)
    out = subprocess.run([str(SQUEEZ), "--backend", "server", "--server-url", base_url, "--json", "test_case_12 FAILED"],
                         input=log.encode(), capture_output=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    answer = json.loads(out.stdout)
    assert answer["pruned"] is True
    local = build_pruner("bm25").prune("test_case_12 FAILED", log)
    assert answer["spans"] == local.spans


# -- issue #15: text the client could not encode, bodies that are not JSON text, the schema as the contract --

def test_a_lone_surrogate_is_answered_like_other_text_and_per_item_in_a_batch(base_url):
    log = make_log().replace("test_case_25 FAILED", "test_case_25 FAILED \ud800")  # a string cut mid-emoji
    raw = json.dumps({"query": "which test FAILED \udfff", "tool_output": log})  # ensure_ascii: "\ud800" escapes
    answer = requests.post(f"{base_url}/v1/prune", data=raw, headers={"Content-Type": "application/json"}, timeout=60)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    replaced = log.replace("\ud800", "\ufffd")
    check_answer(body, replaced)
    assert "test_case_25 FAILED \ufffd" in body["text"]
    batch = json.dumps({"items": [{"query": "FAILED", "tool_output": log}, {"query": "FAILED", "tool_output": make_log()}]})
    results = requests.post(f"{base_url}/v1/prune/batch", data=batch, headers={"Content-Type": "application/json"},
                            timeout=60)
    assert results.status_code == 200, results.text
    first, second = results.json()["results"]
    check_answer(first, replaced) and check_answer(second, make_log())
    assert first["pruned"] and second["pruned"]


@pytest.mark.parametrize("raw, expected", [
    (b'{"query": "x", "tool_output": "caf\xe9"}', "not valid UTF-8"),
    (b"[" * 20_000 + b"]" * 20_000, "nested"),
    (b'{"query": "x", "tool_output": ' + b"[" * 5_000 + b"]" * 5_000 + b"}", "nested"),
])
def test_bodies_that_are_not_json_text_are_422(base_url, raw, expected):
    for path in ("/v1/prune", "/v1/prune/batch"):
        response = requests.post(f"{base_url}{path}", data=raw, headers={"Content-Type": "application/json"},
                                 timeout=60)
        assert response.status_code == 422, response.text
        assert expected in error_message(response)


def test_the_service_keeps_to_its_own_openapi_schema(base_url):
    """schemathesis against the running app's /openapi.json on loopback: positive and negative cases,
    bounded, derandomized; every default check (no 5xx, documented statuses, response schemas,
    valid data accepted, invalid data rejected)."""
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode

    assert base_url.startswith("http://127.0.0.1:")
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    labels = []
    for result in schema.get_all_operations():
        operation = result.ok()
        labels.append(operation.label)
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            @settings(max_examples=12, deadline=None, derandomize=True, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy(generation_mode=mode))
            def check(case):
                case.call_and_validate(base_url=base_url, timeout=60)

            try:
                check()
            except Unsatisfiable:  # nothing to get wrong: a route whose schema has no body and no parameters
                assert mode is GenerationMode.NEGATIVE, operation.label
    assert {"POST /v1/prune", "POST /v1/prune/batch", "POST /v1/chat/completions"} <= set(labels)


def test_slow_bodies_get_408_and_do_not_starve_other_callers(base_url):
    """Slowloris: clients that send headers, then a body one byte at a time, each hold a replica slot.
    More of them than the replica has slots; a normal request must still be answered."""
    import threading
    import time

    host, port = base_url.removeprefix("http://").split(":")
    stop = threading.Event()
    answers: list[bytes] = []

    def trickle() -> None:
        with socket.create_connection((host, int(port)), timeout=60) as sock:
            sock.sendall(b"POST /slowbody/v1/prune HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000\r\n\r\n{")
            sock.settimeout(0.2)
            for _ in range(150):  # ~30 s of one byte per 0.2 s at most: far past the 1 s deadline
                if stop.is_set():
                    break
                try:
                    data = sock.recv(4096)
                    if data:
                        answers.append(data)
                    break  # an answer (or the server closed): this client is done
                except TimeoutError:
                    pass
                try:
                    sock.sendall(b" ")
                except OSError:
                    break

    threads = [threading.Thread(target=trickle) for _ in range(6)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)  # the slow clients hold the slots first
    try:
        response = post(f"{base_url}/slowbody/v1/prune", {"query": "failed", "tool_output": make_log()}, timeout=20)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert response.status_code == 200 and response.json()["kept_lines"] >= 1
    assert answers and all(a.startswith(b"HTTP/1.1 408") for a in answers), answers[:2]
