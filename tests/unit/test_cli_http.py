"""`squeez` against servers over real HTTP on 127.0.0.1, and through the fake generative engine.

A small scripted OpenAI-compatible server stands in for vLLM (the real server is covered by the
openai backend's own integration tests): here what matters is what the command does with a
server's answer, with a server that is down, and with one that never answers.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from squeez_ray.prompt import render_prompt
from squeez_ray.testing.http import JsonHandler, LoopbackServer, free_port

SQUEEZ = Path(sys.executable).parent / "squeez"
ERROR_LINE = "    ERROR module_42.c:17: undefined reference to `frobnicate'"


def make_log(n: int = 60) -> bytes:
    lines = [f"INFO step {i}: compiling module_{i}.c" for i in range(1, n + 1)]
    lines[41] = ERROR_LINE
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SQUEEZ_", "XDG_"))}
    clean.update(HOME=str(tmp_path / "home"), SQUEEZ_STORE=str(tmp_path / "store"))
    return clean


def squeez(args: list[str], data: bytes, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(SQUEEZ), *args], input=data, capture_output=True, env=env, timeout=timeout)


class ScriptedOpenAI(JsonHandler):
    """GET /v1/models and POST /v1/completions; the reply keeps the error line (stripped, as
    models often do) and invents one line that is not in the output."""

    requests: list[dict] = []

    def do_GET(self):  # noqa: N802 (http.server's naming)
        self.send_json(200, {"object": "list", "data": [{"id": "squeez-test", "object": "model", "created": 0,
                                                 "owned_by": "test", "max_model_len": 4096}]})

    def do_POST(self):  # noqa: N802 (http.server's naming)
        request = self.read_json()
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **request})
        reply = "<relevant_lines>\n" + ERROR_LINE.strip() + "\nan invented line\n</relevant_lines>"
        self.send_json(200, {"id": "x", "object": "text_completion", "created": 0, "model": request["model"],
                    "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None, "text": reply}],
                    "usage": {"prompt_tokens": 321, "completion_tokens": 17, "total_tokens": 338}})


@pytest.fixture
def openai_server():
    ScriptedOpenAI.requests = []
    with LoopbackServer(ScriptedOpenAI) as server:
        yield server.url


def test_openai_backend_answer_is_mapped_to_source_lines(openai_server, env, tmp_path):
    config = tmp_path / "squeez.yaml"
    config.write_text(f"backend: openai\nserver_url: {openai_server}\nsystem_prompt: the prompt it was trained with\n")
    out = squeez(["--stats", "--api-key", "sekret", "undefined reference"], make_log(),
                 {**env, "SQUEEZ_CONFIG": str(config)})
    assert out.returncode == 0, out.stderr.decode()
    lines = out.stdout.decode().rstrip("\n").split("\n")
    assert lines[0] == ERROR_LINE  # the source's own line, indentation included; the invented one dropped
    assert lines[1].startswith("[squeez: kept 1 of 61 lines (openai); full output: squeez show ")
    assert len(lines) == 2
    assert b"model tokens in 321, out 17" in out.stderr
    (sent,) = ScriptedOpenAI.requests
    assert sent["path"] == "/v1/completions" and sent["model"] == "squeez-test"
    assert sent["auth"] == "Bearer sekret"
    # The released layout, rendered here and sent as text (no server-side chat template).
    assert sent["prompt"] == render_prompt("undefined reference", make_log().decode(),
                                           "the prompt it was trained with")



def test_server_down_fails_open(env):
    data = make_log()
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    args = ["--backend", "openai", "--server-url", url, "--server-model", "m", "--timeout", "30"]
    out = squeez(args + ["error"], data, {**env, "SQUEEZ_MAX_RETRIES": "0"})
    assert out.returncode == 0 and out.stdout == data
    assert b"backend openai failed (APIConnectionError" in out.stderr
    strict = squeez(args + ["--strict", "error"], data, {**env, "SQUEEZ_MAX_RETRIES": "0"})
    assert strict.returncode == 1 and strict.stdout == b""


def test_a_server_that_never_answers_is_cut_by_the_timeout(env):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # accepts connections (the kernel does) but never replies
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        data = make_log()
        out = squeez(["--backend", "openai", "--server-url", url, "--timeout", "2", "error"], data, env, timeout=60)
        assert out.returncode == 0 and out.stdout == data
        assert b"backend openai timed out after 2 s" in out.stderr
    finally:
        listener.close()


def test_fake_engine_through_the_whole_generative_path(env):
    data = make_log()
    out = squeez(["--backend", "fake", "--json", "frobnicate"], data, env)
    assert out.returncode == 0, out.stderr.decode()
    payload = json.loads(out.stdout)
    assert payload["pruned"] is True and payload["spans"] == [[42, 42]] and payload["text"] == ERROR_LINE
    # a query naming something the output does not hold answers empty (a plain-words one would get the
    # head-and-tail fallback: cli/pruning.py)
    negative = squeez(["--backend", "fake", "nothing_like_this"], data, env)
    assert negative.stdout.decode() == ("[squeez: no lines matched the query; 0 of 61 lines kept (fake); "
                                        f"full output: squeez show {payload['store_id']}]\n")
