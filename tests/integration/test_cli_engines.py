"""`squeez` end to end on a real engine (transformers) with the tiny random Qwen3. (The vllm-cpu
backend is the same ``build_pruner`` tested in test_infer_vllm.py; its CLI run, 75 s of vLLM start-up,
left CI to keep it under 30 minutes.)

The weights are random, so what is kept is arbitrary; what must hold is the contract: the engine
really ran (``pruned`` is true, not a fail-open pass-through), every kept line is a source line in
order, stdout is only the answer although engines log, and the store gives the input back.
Run under the heavy lock: ``flock /tmp/squeez-heavy.lock pytest tests/integration/test_cli_engines.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SQUEEZ = Path(sys.executable).parent / "squeez"
# The transformers engine in a subprocess, no Ray, Serve or vLLM: beside the cluster streams, not in their queue.
pytestmark = pytest.mark.no_cluster


def make_log(n: int = 40) -> bytes:
    lines = [f"tests/test_mod_{i}.py::test_case_{i} PASSED" for i in range(1, n + 1)]
    lines[24] = "tests/test_mod_25.py::test_case_25 FAILED - AssertionError: expected 504, got 200"
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SQUEEZ_", "XDG_"))}
    clean.update(HOME=str(tmp_path / "home"), SQUEEZ_STORE=str(tmp_path / "store"), HF_HUB_OFFLINE="1",
                 VLLM_CPU_KVCACHE_SPACE="1", TOKENIZERS_PARALLELISM="false",
                 SQUEEZ_MAX_NEW_TOKENS="48")  # random weights never stop early: bound the generation
    return clean


def run_cli(args: list[str], data: bytes, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(SQUEEZ), *args], input=data, capture_output=True, env=env, timeout=590)


def check_json_answer(out: subprocess.CompletedProcess, data: bytes, env: dict) -> dict:
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    payload = json.loads(out.stdout)  # fails if engine logs leaked into stdout
    assert payload["pruned"] is True, payload["reason"]  # the engine answered; no fail-open
    source = data.decode().split("\n")
    assert payload["total_lines"] == len(source)
    kept = [source[n - 1] for start, end in payload["spans"] for n in range(start, end + 1)]
    assert all(1 <= s <= e <= len(source) for s, e in payload["spans"])
    assert payload["text"] == "\n".join(kept) and payload["kept_lines"] == len(kept)
    shown = subprocess.run([str(SQUEEZ), "show", payload["store_id"]], capture_output=True, env=env, timeout=60)
    assert shown.stdout == data
    return payload


def test_transformers_backend_through_the_cli(tiny_qwen3_dir, env):
    data = make_log()
    args = ["--backend", "transformers", "--model", str(tiny_qwen3_dir), "--timeout", "500", "--min-lines", "1"]
    check_json_answer(run_cli(args + ["--json", "which test failed"], data, env), data, env)
    text = run_cli(args + ["--line-numbers", "which test failed"], data, env)
    assert text.returncode == 0, text.stderr.decode()[-3000:]
    *kept, footer = text.stdout.rstrip(b"\n").split(b"\n")
    # random weights may keep no line: then the footer says `(transformers, fallback: head and tail ...)`
    assert footer.startswith(b"[squeez: ") and b"(transformers" in footer
    source = data.decode().split("\n")
    for line in kept:
        number, content = line.decode().split(": ", 1)
        assert source[int(number) - 1] == content
