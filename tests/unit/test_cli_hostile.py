"""`squeez` and `squeez run` under issue 34's hostile inputs: huge numbers, closed or full outputs, signals
while a pass-through streams, planted FIFOs, YAML alias bombs. Each answers with the output (or one line on
stderr), never a traceback or a hang. Real subprocesses of the entry point, real signals, bounded waits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_prune import SQUEEZ, env  # noqa: F401 - env is a fixture

from squeez_ray.cli import settings as settings_mod

SEQ_300 = b"".join(b"%d\n" % i for i in range(1, 301))
PASSED_300 = b"".join(b"tests/t%d.py PASSED\n" % i for i in range(1, 301))


def squeez(args: list[str], env: dict, data: bytes | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(SQUEEZ), *args], input=data, capture_output=True, env=env, timeout=120, **kwargs)


# -- item 6: a timeout too large for Python's timers ---------------------------------------------------

def test_a_huge_timeout_is_read_as_thirty_days():
    settings = settings_mod.resolve(env={"SQUEEZ_TIMEOUT": "99999999999", "HOME": "/nonexistent"})
    assert settings.timeout_s == settings_mod.MAX_WAIT_S == 30 * 86400
    settings = settings_mod.resolve({"timeout_s": 1e300}, env={"HOME": "/nonexistent"})
    assert settings.timeout_s == settings_mod.MAX_WAIT_S


def test_a_huge_timeout_still_answers_in_run_and_in_the_pipe(env):
    env = {**env, "SQUEEZ_TIMEOUT": "99999999999"}
    out = squeez(["run", "--backend", "bm25", "q", "--", "bash", "-c", "seq 300; exit 3"], env)
    assert out.returncode == 3 and out.stdout.endswith(b"]\n") and b"[squeez: kept" in out.stdout, out.stderr
    assert b"Traceback" not in out.stderr
    piped = squeez(["--backend", "bm25", "tests"], env, PASSED_300)
    assert piped.returncode == 0 and b"[squeez: kept" in piped.stdout and b"Traceback" not in piped.stderr
