"""`squeez run` never ends with an empty stdout once the command printed (issue 34 items 4 and 5): a signal
while it prunes, a command that ignores SIGTERM under TERM-then-KILL, a command that leaves a background
process holding the pipe. Real processes (the entry point, bash), real signals, bounded waits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli_prune import RUNNER, SQUEEZ, default_signals, env  # noqa: F401 - env is a fixture

SEQ_300 = b"".join(b"%d\n" % i for i in range(1, 301))


def _wait_for(path: Path, proc: subprocess.Popen, bound_s: float = 300) -> None:
    deadline = time.monotonic() + bound_s  # a bound on waiting, not a speed assertion
    while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if not path.exists():
        proc.kill()
        _, stderr = proc.communicate(timeout=60)
        raise AssertionError(f"never got there (exit {proc.returncode}): {stderr[-2000:]!r}")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_while_run_prunes_prints_the_full_output_with_the_commands_exit_code(env, tmp_path, signum):
    pidfile = tmp_path / "backend.pid"  # the sleepy backend writes it once it is pruning (120 s asleep)
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, "run", "--backend", "sleepy", "q", "--",
                             "bash", "-c", "seq 300; exit 3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, preexec_fn=default_signals,
                            env={**env, "SQUEEZ_TIMEOUT": "900", "TEST_CHILD_PIDFILE": str(pidfile)})
    _wait_for(pidfile, proc)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 3 and stdout == SEQ_300, stderr[-2000:]
    assert f"interrupted by {signal.Signals(signum).name}".encode() in stderr and b"Traceback" not in stderr


def test_timeout_during_pruning_keeps_the_output(env, tmp_path):
    # The repro: `timeout 5 squeez run "which test failed" -- cat big.txt | wc -c` printed 0 bytes.
    big = tmp_path / "big.txt"
    big.write_bytes(SEQ_300)
    pidfile = tmp_path / "backend.pid"
    proc = subprocess.Popen(["timeout", "600", sys.executable, "-c", RUNNER, "run", "--backend", "sleepy", "q",
                             "--", "cat", str(big)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, preexec_fn=default_signals,
                            env={**env, "SQUEEZ_TIMEOUT": "900", "TEST_CHILD_PIDFILE": str(pidfile)})
    _wait_for(pidfile, proc)
    os.kill(proc.pid, signal.SIGTERM)  # timeout passes it on, as when its time is up
    stdout, stderr = proc.communicate(timeout=60)
    assert stdout == SEQ_300 and proc.returncode == 0, stderr[-2000:]


def test_a_command_that_ignores_sigterm_is_killed_and_its_output_printed(env, tmp_path):
    # `timeout -k 3 2 squeez run q -- bash -c 'trap "" TERM; seq 300; sleep 30'` printed nothing: the KILL
    # came while squeez still waited for the command.
    started = tmp_path / "started"
    script = f'trap "" TERM; seq 300; touch {started}; sleep 60'
    proc = subprocess.Popen([str(SQUEEZ), "run", "--backend", "bm25", "q", "--", "bash", "-c", script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env,
                            preexec_fn=default_signals)
    _wait_for(started, proc)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)  # far more than the 1 s grace: a hang fails here
    assert stdout == SEQ_300 and proc.returncode == 128 + signal.SIGKILL, stderr[-2000:]
    assert b"killed it" in stderr and b"interrupted by SIGTERM" in stderr


def test_a_command_that_honours_sigterm_ends_and_its_output_is_printed_whole(env, tmp_path):
    started = tmp_path / "started"
    script = f'trap "echo summary: stopped; exit 143" TERM; seq 300; touch {started}; sleep 60 & wait'
    proc = subprocess.Popen([str(SQUEEZ), "run", "--backend", "bm25", "q", "--", "bash", "-c", script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env,
                            preexec_fn=default_signals)
    _wait_for(started, proc)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert stdout == SEQ_300 + b"summary: stopped\n" and proc.returncode == 143, stderr[-2000:]


def test_a_background_process_holding_the_pipe_does_not_keep_run_waiting(env, tmp_path):
    pidfile = tmp_path / "background.pid"
    script = f"seq 300; sleep 600 & echo $! > {pidfile}; exit 0"
    try:
        out = subprocess.run([str(SQUEEZ), "run", "--backend", "bm25", "--min-lines", "1000", "q", "--",
                              "bash", "-c", script], capture_output=True, env=env, timeout=60,
                             stdin=subprocess.DEVNULL)
    finally:
        if pidfile.exists():
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
    assert out.returncode == 0 and out.stdout == SEQ_300, out.stderr[-2000:]
    assert b"still holds its output open" in out.stderr
