"""The README's two commands are the ones CI and newcomers run, so they are run here as written.

The README marks them with ``<!-- readme: setup-and-main -->`` and ``<!-- readme: setup-and-test -->``
just before their code blocks; ``.ci/run`` must run exactly the test command.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def readme_command(tag: str) -> str:
    text = (REPO / "README.md").read_text()
    match = re.search(rf"<!-- readme: {tag} -->\s*```(?:bash|console|sh)?\n(.*?)```", text, re.DOTALL)
    assert match, f"README.md has no code block marked <!-- readme: {tag} -->"
    lines = [line.removeprefix("$ ").strip() for line in match.group(1).strip().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    return " && ".join(lines)


def test_ci_runs_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text()
    assert readme_command("setup-and-test") in ci


def test_readme_main_command_is_the_quickstart():
    command = readme_command("setup-and-main")
    assert "scripts/setup.sh" in command and "jobs/quickstart.py" in command


@pytest.mark.slow
def test_readme_main_command_runs_the_whole_pipeline():
    """Setup (idempotent here) then the main job, exactly as the README writes them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env.setdefault("RAY_AUTH_MODE", "disabled")
    run = subprocess.run(["bash", "-c", readme_command("setup-and-main")], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=1500)
    tail = (run.stdout + run.stderr)[-6000:]
    assert run.returncode == 0, tail
    for step in range(1, 8):
        assert f"=== [{step}/7]" in run.stdout, tail
    assert "machinery" in run.stdout  # says plainly that the tiny model is not about quality
    summary = json.loads((REPO / "runs" / "quickstart" / "summary.json").read_text())
    metrics = json.loads(Path(summary["metrics"]).read_text())
    assert {"squeez-pruner", "bm25", "first", "last", "random"} <= set(metrics["systems"])
    assert Path(summary["plot"]).stat().st_size > 0 and Path(summary["report"]).exists()
