"""`squeez` keeps the piped output under the abuse of issue #28: a command line long enough to crash
onnxruntime's import, usage mistakes, signals, configs nested too deeply, tampered store entries.
Real subprocesses of the entry point and real signals, as in test_cli_prune.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_prune import RUNNER, SQUEEZ, answer_lines, make_log, squeez


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A clean environment: no user config, a private store, no inherited SQUEEZ_* settings."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SQUEEZ_", "XDG_"))}
    clean.update(HOME=str(tmp_path / "home"), SQUEEZ_STORE=str(tmp_path / "store"))
    return clean


def passed_log(n: int = 300) -> bytes:
    return "".join(f"tests/t{i}.py PASSED\n" for i in range(1, n + 1)).encode()


def test_a_query_longer_than_32_kb_still_gets_an_answer_from_the_default_encoder(env):
    # The command line, not the query, crashed `import onnxruntime` (exit 139, nothing printed).
    out = squeez(["q" * 33_000], passed_log(), env)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    kept, footer = answer_lines(out.stdout)
    assert b"(encoder" in footer
