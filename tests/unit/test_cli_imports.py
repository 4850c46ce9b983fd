"""`squeez --backend bm25` must start without the heavy stack (torch, ray, vllm, transformers)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

HEAVY = ("torch", "ray", "vllm", "transformers")


def imported_modules(args: list[str], stdin: bytes, env: dict) -> set[str]:
    """Modules the real entry point imported (from CPython's own -X importtime trace)."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "squeez_ray.cli", *args], input=stdin,
                         capture_output=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    names = set()
    for line in out.stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    assert "squeez_ray.cli.prune" in names  # the trace really was read
    return names


@pytest.mark.parametrize("args, backend_module", [
    (["--backend", "bm25"], "bm25s"),
    # The fake engine runs the whole generative path (chunking, parsing, fuzzy mapping).
    (["--backend", "fake"], "squeez_ray.infer.generative"),
    # A server client: the server's tokenizer is not loaded locally. (Port 9 is discard: fails fast.)
    (["--backend", "openai", "--server-url", "http://127.0.0.1:9", "--server-model", "m"], "openai"),
])
def test_pruning_without_a_local_model_imports_no_heavy_package(tmp_path, args, backend_module):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUEEZ_")}
    env.update(HOME=str(tmp_path), SQUEEZ_STORE=str(tmp_path / "store"), SQUEEZ_MAX_RETRIES="0")
    log = "\n".join(f"line {i}" for i in range(100)).encode() + b"\nERROR here\n"
    names = imported_modules([*args, "--stats", "error"], log, env)
    assert backend_module in names  # the backend really ran
    top_level = {name.split(".")[0] for name in names}
    assert not top_level & set(HEAVY), sorted(top_level & set(HEAVY))


def test_import_cli_is_light():
    code = "import sys, squeez_ray.cli; print(sorted(m for m in %r if m in sys.modules))" % (HEAVY,)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
