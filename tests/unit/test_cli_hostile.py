"""`squeez` and `squeez run` under issue 34's hostile inputs: huge numbers, closed or full outputs, signals
while a pass-through streams, planted FIFOs, YAML alias bombs. Each answers with the output (or one line on
stderr), never a traceback or a hang. Real subprocesses of the entry point, real signals, bounded waits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pytest
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


# -- item 8: a signal while an input over max_input_mb streams through and its producer hangs -----------

@pytest.mark.parametrize("as_json", [False, True])
def test_a_signal_while_streaming_keeps_every_byte_read_and_ends_the_json(env, as_json):
    """The producer writes ~1 MB (4x the cap), then the summary, then hangs: the summary must come out."""
    proc = subprocess.Popen([str(SQUEEZ), "--backend", "bm25", *(["--json"] if as_json else []), "q"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**env, "SQUEEZ_MAX_INPUT_MB": "0.25"}, preexec_fn=default_signals)
    data = PASSED_300 * 150 + b"=== 3 failed, 44997 passed in 812.00s ===\nafter the summary, no newline"
    writer = threading.Thread(target=lambda: (proc.stdin.write(data), proc.stdin.flush()))
    writer.start()  # then the producer hangs, its pipe open
    out = bytearray()
    through = threading.Event()

    def read_stdout() -> None:
        while piece := proc.stdout.read1(1 << 16):
            out.extend(piece)
            if b"after the summary, no newline" in out:
                through.set()

    reader = threading.Thread(target=read_stdout)
    reader.start()
    through.wait(timeout=30)  # everything written is through (a bound: a squeez holding bytes back never gets there)
    writer.join(timeout=60)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(timeout=60)
    stderr = proc.stderr.read()
    assert proc.returncode == 128 + signal.SIGTERM and b"Traceback" not in stderr, stderr
    if as_json:
        payload = json.loads(bytes(out))  # terminated: a whole JSON object
        assert payload["text"] == data.decode() and payload["pruned"] is False
        assert "interrupted by SIGTERM" in payload["reason"] and payload["total_lines"] == data.count(b"\n") + 1
    else:
        assert bytes(out) == data


# -- item 10: a YAML alias bomb in the config ----------------------------------------------------------

def _alias_bomb(levels: int = 9) -> str:
    """~600 bytes of YAML that expand to 10**levels values once anything walks or prints them."""
    lines = ['a0: &a0 ["xxxxxxxxxx", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_config_is_refused_in_one_line_and_the_output_passes_through(env, tmp_path):
    config = tmp_path / "bomb.yaml"
    config.write_text(_alias_bomb())
    limit_memory = lambda: __import__("resource").setrlimit(  # noqa: E731 - a bomb that expands fails here
        __import__("resource").RLIMIT_AS, (3 << 30, 3 << 30))
    out = squeez(["--config", str(config), "--backend", "bm25", "tests"], env, PASSED_300, preexec_fn=limit_memory)
    assert out.returncode == 2 and out.stdout == PASSED_300, out.stderr[-2000:]
    assert b"expands to over 100,000 values through YAML aliases" in out.stderr and b"Traceback" not in out.stderr
    ran = squeez(["run", "--config", str(config), "q", "--", "bash", "-c", "seq 300; exit 3"], env,
                 preexec_fn=limit_memory)
    assert ran.returncode == 3 and ran.stdout == SEQ_300 and b"alias" in ran.stderr, ran.stderr[-2000:]


def test_an_alias_bomb_in_a_squeez_variable_stays_a_string():
    bomb = "{" + ", ".join(_alias_bomb(7).splitlines()) + "}"  # the same bomb as one flow mapping
    assert settings_mod.yaml_expands_past(bomb, 100_000)
    assert settings_mod.yaml_expands_past(_alias_bomb(7), 100_000)
    assert not settings_mod.yaml_expands_past("a: &x [1, 2]\nb: *x\n", 100_000)
    assert not settings_mod.yaml_expands_past("backend: bm25\nmin_lines: 20\n", 100_000)
    assert settings_mod.yaml_expands_past("&a [*a]", 100_000)  # a node that contains itself
    with pytest.raises(settings_mod.ConfigError, match="SQUEEZ_KEEP_RATIO"):
        settings_mod.resolve(env={"SQUEEZ_KEEP_RATIO": bomb, "HOME": "/nonexistent"})


# -- numbers over Python's 4,300-digit limit: one line, never a traceback --------------------------------

def test_integers_over_4300_digits_are_one_line_errors(env, tmp_path):
    huge = "9" * 5000
    piped = squeez(["--backend", "bm25", "tests"], {**env, "SQUEEZ_MIN_LINES": huge}, PASSED_300)
    assert piped.returncode == 2 and piped.stdout == PASSED_300
    assert b"SQUEEZ_MIN_LINES: a value of 5000 characters is out of range" in piped.stderr
    ran = squeez(["run", "--backend", "bm25", "q", "--", "bash", "-c", "seq 300; exit 3"],
                 {**env, "SQUEEZ_MIN_LINES": huge})
    assert ran.returncode == 3 and ran.stdout == SEQ_300 and b"out of range" in ran.stderr, ran.stderr[-2000:]
    config = tmp_path / "config.yaml"
    config.write_text(f"min_lines: {huge}\n")
    from_file = squeez(["--config", str(config), "--backend", "bm25", "tests"], env, PASSED_300)
    assert from_file.returncode == 2 and b"a number too long to read" in from_file.stderr
    ident = squeez(["--backend", "bm25", "tests"], env, PASSED_300).stdout.rsplit(b"squeez show ", 1)[1][:12]
    shown = squeez(["show", ident.decode(), "--lines", f"1-{huge}"], env)
    assert shown.returncode == 2 and shown.stderr == b"squeez: --lines: a line number of 5000 digits is out of range\n"
    for out in (piped, ran, from_file, shown):
        assert b"Traceback" not in out.stderr


# -- "Tracebacks instead of one line": stdout closed or full --------------------------------------------

def test_a_closed_stdout_is_one_line_and_run_still_runs_the_command(env, tmp_path):
    closed = {"stdout": None, "pass_fds": (), "preexec_fn": lambda: os.close(1)}  # `squeez ... >&-`
    piped = subprocess.run([str(SQUEEZ), "--backend", "bm25", "tests"], input=PASSED_300, stderr=subprocess.PIPE,
                           env=env, timeout=120, **closed)
    assert piped.returncode == 0 and piped.stderr == b"squeez: stdout is closed: the answer is discarded\n"
    marker = tmp_path / "ran"
    ran = subprocess.run([str(SQUEEZ), "run", "--backend", "bm25", "q", "--", "bash", "-c",
                          f"touch {marker}; seq 300; exit 4"], stderr=subprocess.PIPE, env=env, timeout=120,
                         stdin=subprocess.DEVNULL, **closed)
    assert ran.returncode == 4 and marker.exists(), ran.stderr
    assert ran.stderr == b"squeez: stdout is closed: the answer is discarded\n"


def test_run_into_a_full_disk_keeps_the_commands_exit_code(env):
    with open("/dev/full", "wb") as full:
        out = subprocess.run([str(SQUEEZ), "run", "--backend", "bm25", "q", "--", "bash", "-c", "seq 300; exit 3"],
                             stdout=full, stderr=subprocess.PIPE, env=env, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 3 and out.stderr == b"squeez: cannot write the output: No space left on device\n"


# -- memory: a 14 MB single line (issue 34 "Memory") ------------------------------------------------------

def test_model_text_cuts_long_lines_only_for_the_model_and_keeps_the_line_count():
    from squeez_ray.cli.intake import MODEL_LINE_CHARS, model_text

    data = b"short\n" + b"word " * 10_000 + b"\n\xff\nend"
    text = model_text(data)
    assert text.split("\n") == ["short", ("word " * 10_000)[:MODEL_LINE_CHARS], "\ufffd", "end"]
    assert model_text(b"a\nb\n") == "a\nb\n"


def test_a_14_mb_single_line_is_pruned_in_bounded_memory_and_printed_whole(env, tmp_path):
    """Peak RSS of the squeez process, measured by a fresh parent (RUSAGE_CHILDREN covers only its child).
    Before the cut, the encoder's per-line term counts alone took ~390 MB (574 MB peak, 50 s)."""
    big_line = b"word " * 2_800_000
    data = big_line + b"\n" + b"".join(b"tests/t%d.py FAILED\n" % i for i in range(40))
    path = tmp_path / "one_line.log"
    path.write_bytes(data)
    measure = ("import resource, subprocess, sys\n"
               "out = subprocess.run(sys.argv[1:], capture_output=True)\n"
               "sys.stdout.buffer.write(out.stdout)\n"
               "sys.stderr.write('PEAK_KB=%d\\n' % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    out = subprocess.run([sys.executable, "-c", measure, str(SQUEEZ), "--input-file", str(path), "--keep-ratio", "1",
                          "--timeout", "600", "word"], capture_output=True, env={**env, "SQUEEZ_DAEMON": "0"},
                         timeout=900)
    peak_mb = int(out.stderr.rsplit(b"PEAK_KB=", 1)[1]) >> 10
    assert peak_mb < 350, (peak_mb, out.stderr[-2000:])
    if big_line in out.stdout:  # when the model keeps it, the line comes back whole
        assert out.stdout.startswith(big_line + b"\n")
