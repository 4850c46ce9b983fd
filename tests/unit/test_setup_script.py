"""scripts/setup.sh: a re-run with the same pyproject.toml and constraints.txt skips pip (the README test
runs it again after CI's own set-up); a changed input, a failed install or SQUEEZ_SETUP_FORCE reinstalls.
Run in a copy with a stand-in .venv/bin/python that records its arguments (no pip, no network)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def make_copy(tmp_path: Path, *, fail_imports: bool = False, fail_deepspeed_op: bool = False) -> Path:
    (tmp_path / "scripts").mkdir(parents=True)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "setup.sh", tmp_path / "scripts")
    for name in ("pyproject.toml", "constraints.txt"):
        shutil.copy(REPO / name, tmp_path)
    fail = 'case "$*" in *"import squeez_ray, torch"*) exit 1;; esac\n' if fail_imports else ""
    fail += 'case "$*" in *build_shm_op*) echo "g++: not found" >&2; exit 1;; esac\n' if fail_deepspeed_op else ""
    python = tmp_path / ".venv" / "bin" / "python"
    python.write_text(f'#!/usr/bin/env bash\necho "$*" >> "{tmp_path}/calls"\n{fail}')
    python.chmod(0o755)
    return tmp_path


def run_setup(copy: Path, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    (copy / "calls").unlink(missing_ok=True)
    done = subprocess.run(["bash", "scripts/setup.sh"], cwd=copy, env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=60)
    calls = (copy / "calls").read_text().splitlines() if (copy / "calls").exists() else []
    return done, calls


def setup(copy: Path, **env: str) -> tuple[int, list[str]]:
    done, calls = run_setup(copy, **env)
    return done.returncode, calls


def pip_installs(calls: list[str]) -> int:
    return sum(call.startswith("-m pip install -q --no-compile -c constraints.txt") for call in calls)


def test_a_rerun_skips_pip_until_an_input_changes(tmp_path):
    copy = make_copy(tmp_path)
    code, calls = setup(copy)
    assert code == 0 and pip_installs(calls) == 1 and any("import squeez_ray" in c for c in calls)
    code, calls = setup(copy)
    assert code == 0 and pip_installs(calls) == 0 and not any("import squeez_ray" in c for c in calls)
    assert any("resolve_model" in c for c in calls)  # the base model is still checked (a no-op once converted)
    with (copy / "constraints.txt").open("a") as f:
        f.write("# a new pin\n")
    assert pip_installs(setup(copy)[1]) == 1
    assert pip_installs(setup(copy)[1]) == 0
    assert pip_installs(setup(copy, SQUEEZ_SETUP_FORCE="1")[1]) == 1


def test_an_install_whose_imports_fail_is_redone_next_time(tmp_path):
    copy = make_copy(tmp_path, fail_imports=True)
    code, calls = setup(copy)
    assert code != 0 and pip_installs(calls) == 1
    code, calls = setup(copy)
    assert code != 0 and pip_installs(calls) == 1  # no stamp was left by the broken install


def test_a_fresh_install_builds_deepspeeds_cpu_op_and_a_failed_build_is_only_reported(tmp_path):
    copy = make_copy(tmp_path / "ok")
    done, calls = run_setup(copy)
    assert done.returncode == 0 and sum("build_shm_op" in c for c in calls) == 1
    assert "DeepSpeed's CPU op, built beside" in done.stdout
    assert not any("build_shm_op" in c for c in run_setup(copy)[1])  # a re-run leaves it to DeepSpeed's cache

    copy = make_copy(tmp_path / "no-compiler", fail_deepspeed_op=True)
    done, calls = run_setup(copy)
    assert done.returncode == 0 and (copy / ".venv" / ".squeez-setup-stamp").exists()
    assert "DeepSpeed's CPU op did not build" in done.stdout
    assert "g++: not found" in (copy / ".venv" / "deepspeed-cpu-op.log").read_text()
