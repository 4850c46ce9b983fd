"""`squeez` and `squeez run` under issue 34's hostile inputs: huge numbers, closed or full outputs, signals
while a pass-through streams, planted FIFOs, YAML alias bombs. Each answers with the output (or one line on
stderr), never a traceback or a hang. Real subprocesses of the entry point, real signals, bounded waits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import signal
import time

from test_cli_prune import RUNNER, SQUEEZ, default_signals, env  # noqa: F401 - env is a fixture

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


# -- item 7: the fail-open answer after a backend timeout cannot be written -----------------------------

def _timed_out_pipe(env: dict, stdout, data: bytes = PASSED_300) -> subprocess.Popen:
    """The pipe with the test's sleepy backend and a 1 s timeout: the watchdog writes the fail-open answer."""
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, "--backend", "sleepy", "--timeout", "1", "tests"],
                            stdin=subprocess.PIPE, stdout=stdout, stderr=subprocess.PIPE, env=env,
                            preexec_fn=default_signals)
    proc.stdin.write(data)
    proc.stdin.close()
    return proc


def _finish(proc: subprocess.Popen, bound_s: float = 60) -> bytes:
    """stderr, once the process ended by itself within ``bound_s`` (a bound on waiting: a hang fails)."""
    try:
        proc.wait(timeout=bound_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.stderr.read()


def test_a_full_disk_after_a_backend_timeout_is_one_line_and_the_process_ends(env):
    with open("/dev/full", "wb") as full:
        proc = _timed_out_pipe(env, full)
        stderr = _finish(proc)
    assert proc.returncode == 1 and b"Traceback" not in stderr, stderr
    assert b"timed out after 1 s; cannot write the output: No space left on device" in stderr


def test_a_closed_reader_after_a_backend_timeout_ends_the_process(env):
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = _timed_out_pipe(env, write_end)
    finally:
        os.close(write_end)
    stderr = _finish(proc)
    assert proc.returncode == 0 and b"Traceback" not in stderr and b"Broken pipe" in stderr, stderr


def test_sigterm_ends_the_pipe_while_the_fail_open_answer_is_blocked_on_its_reader(env):
    data = PASSED_300 * 100  # ~700 KB: more than a pipe holds, so the answer's write blocks
    read_end, write_end = os.pipe()
    try:
        proc = _timed_out_pipe(env, write_end, data)
    finally:
        os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        assert reader.read(1) == b"t"  # the watchdog is writing the answer; nobody reads the rest
        proc.send_signal(signal.SIGTERM)
        stderr = _finish(proc)
    assert proc.returncode == 128 + signal.SIGTERM and b"Traceback" not in stderr, stderr
