"""`squeez --backend bm25` must start without the heavy stack (torch, ray, vllm, transformers)."""

from __future__ import annotations

import os
import subprocess
import sys

HEAVY = ("torch", "ray", "vllm", "transformers")


def imported_modules(args: list[str], stdin: bytes, env: dict) -> set[str]:
    """Top-level packages the real entry point imported (from CPython's own -X importtime trace)."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "squeez_ray.cli", *args], input=stdin,
                         capture_output=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    names = set()
    for line in out.stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    assert "squeez_ray" in names  # the trace really was read
    return names


def test_pruning_with_bm25_imports_no_heavy_package(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUEEZ_")}
    env.update(HOME=str(tmp_path), SQUEEZ_STORE=str(tmp_path / "store"))
    log = "\n".join(f"line {i}" for i in range(100)).encode() + b"\nERROR here\n"
    names = imported_modules(["--backend", "bm25", "--stats", "error"], log, env)
    assert "bm25s" in names  # the backend really ran
    assert not names & set(HEAVY), sorted(names & set(HEAVY))


def test_import_cli_is_light():
    code = "import sys, squeez_ray.cli; print(sorted(m for m in %r if m in sys.modules))" % (HEAVY,)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
