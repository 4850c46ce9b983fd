"""The `squeez` command end to end, through a real subprocess of the entry point.

The BM25 baseline is the real model-free backend; a few test-only pruners (an exploding one, a
hanging one, one that prints to stdout like engines do) are registered by a small runner script,
so fail-open, timeout and stdout hygiene are checked deterministically.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

SQUEEZ = Path(sys.executable).parent / "squeez"

RUNNER = r'''
import os, sys, time
from squeez_ray.infer import registry as backends
from squeez_ray.infer.base import Pruner, make_result

class Boom(Pruner):
    name = "boom"
    def _prune_batch(self, requests, render_options):
        raise RuntimeError("engine exploded")

class Sleepy(Pruner):
    """Hangs, with a worker process (as vLLM's engine core is) that must not outlive the command."""
    name = "sleepy"
    def _prune_batch(self, requests, render_options):
        import multiprocessing
        child = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(120,), daemon=True)
        child.start()
        if os.environ.get("TEST_CHILD_PIDFILE"):
            with open(os.environ["TEST_CHILD_PIDFILE"], "w") as f:
                f.write(str(child.pid))
        time.sleep(120)

class Noisy(Pruner):
    """Keeps lines 42 and 61, after printing to stdout from Python and from a child process (as engines do)."""
    name = "noisy"
    def _prune_batch(self, requests, render_options):
        print("engine log line")
        os.system("echo child process log")
        return [make_result(r.tool_output, [(42, 42), (61, 61)], model=self.name, render_options=render_options)
                for r in requests]

class Wrong(Pruner):
    """Answers with spans beyond the output: a backend bug the command must not turn into a mis-cut."""
    name = "wrong"
    def _prune_batch(self, requests, render_options):
        from squeez_ray.infer.base import PruneResult
        return [PruneResult(spans=[[1, 10_000]], kept_lines=10_000, total_lines=10_000, text="x", pruned=True)
                for _ in requests]

class Typed(Pruner):
    """Keeps the lines that mention the request's tool_type hint."""
    name = "typed"
    def _prune_batch(self, requests, render_options):
        return [make_result(r.tool_output, [(i + 1, i + 1) for i, line in enumerate(r.tool_output.split("\n"))
                                            if r.tool_type and r.tool_type in line],
                            model=self.name, render_options=render_options) for r in requests]

build_boom, build_sleepy, build_noisy, build_wrong = (lambda o: Boom()), (lambda o: Sleepy()), (lambda o: Noisy()), (lambda o: Wrong())
class SlowClose(Typed):
    """Answers at once, then does not finish shutting down (as an engine may take seconds) until the
    test, having read the answer to its end, creates the file TEST_RELEASE_FILE."""
    name = "slowclose"
    def close(self):
        while not os.path.exists(os.environ["TEST_RELEASE_FILE"]):
            time.sleep(0.05)

build_typed, build_slowclose = (lambda o: Typed()), (lambda o: SlowClose())
for name in ("boom", "sleepy", "noisy", "wrong", "typed", "slowclose"):
    backends.BACKENDS[name] = "__main__:build_" + name
from squeez_ray.cli import main
sys.exit(main(sys.argv[1:]))
'''


def make_log(n: int = 60) -> bytes:
    lines = [f"INFO step {i}: compiling module_{i}.c" for i in range(1, n + 1)]
    lines[41] = "ERROR module_42.c:17: undefined reference to `frobnicate'"
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A clean environment: no user config, a private store, no inherited SQUEEZ_* settings."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SQUEEZ_", "XDG_"))}
    clean["SQUEEZ_DAEMON"] = "0"  # every call prunes in its own process: no warm one outlives the test
    clean.update(HOME=str(tmp_path / "home"), SQUEEZ_STORE=str(tmp_path / "store"))
    return clean


def squeez(args: list[str], data: bytes | None = b"", env: dict | None = None, runner: bool = False,
           timeout: float = 120) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", RUNNER] if runner else [str(SQUEEZ)]
    return subprocess.run(cmd + args, input=data, capture_output=True, env=env, timeout=timeout)


def default_signals(sighup: object = signal.SIG_DFL) -> None:
    """preexec_fn of the signal tests: the command starts with SIGINT, SIGTERM and SIGHUP at their defaults,
    not as inherited. A run launched under ``nohup`` ignores SIGHUP in every descendant, one launched as a
    background job of a script ignores SIGINT; squeez rightly keeps an ignored signal ignored, and the
    tests of those signals hung (two local CI runs)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, sighup)


def start_while_backend_works(data: bytes, env: dict, tmp_path: Path,
                              sighup: object = signal.SIG_DFL) -> subprocess.Popen:
    """``squeez q`` over ``data`` with the test's sleepy backend, returned once the backend is running
    (its pidfile exists): the moment the signal tests interrupt it. ``sighup``: the disposition the
    command starts with (``default_signals``)."""
    pidfile = tmp_path / "child.pid"
    # A long backend timeout: a lost signal must show as a hang, not as the 60 s default's watchdog
    # answering (exit 0, output passed through). The sleepy backend itself sleeps 120 s.
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, "--backend", "sleepy", "q"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={"SQUEEZ_TIMEOUT": "900", **env, "TEST_CHILD_PIDFILE": str(pidfile)},
                            preexec_fn=lambda: default_signals(sighup))
    proc.stdin.write(data)
    proc.stdin.close()
    proc.stdin = None  # (communicate would flush it)
    deadline = time.monotonic() + 300  # a bound on waiting, not a speed assertion
    while not pidfile.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if not pidfile.exists():
        proc.kill()
        _, stderr = proc.communicate(timeout=60)
        raise AssertionError(f"the sleepy backend never started (exit {proc.returncode}): {stderr[-2000:]!r}")
    return proc


def answer_lines(stdout: bytes) -> tuple[list[bytes], bytes]:
    """Kept lines and the footer of a text answer."""
    lines = stdout.rstrip(b"\n").split(b"\n")
    assert lines[-1].startswith(b"[squeez: "), stdout
    return lines[:-1], lines[-1]


def assert_subsequence(kept: list[bytes], source: bytes) -> None:
    source_lines = source.split(b"\n")
    position = 0
    for line in kept:
        position = source_lines.index(line, position) + 1  # ValueError when not a source line in order


def test_stdin_and_input_file_give_the_same_verbatim_answer(env, tmp_path):
    data = make_log()
    from_stdin = squeez(["--backend", "bm25", "undefined reference error"], data, env)
    path = tmp_path / "build.log"
    path.write_bytes(data)
    from_file = squeez(["--backend", "bm25", "--input-file", str(path), "undefined reference error"], None, env)
    assert from_stdin.returncode == 0 and from_file.returncode == 0, from_stdin.stderr
    assert from_stdin.stdout == from_file.stdout
    kept, footer = answer_lines(from_stdin.stdout)
    assert b"ERROR module_42.c:17: undefined reference to `frobnicate'" in kept
    assert len(kept) == 6  # 10% of 61 lines (the trailing newline makes an empty 61st line)
    assert_subsequence(kept, data)
    assert footer.startswith(b"[squeez: kept 6 of 61 lines (bm25); full output: squeez show ")


def test_json_answer_shape_and_spans_are_a_subset_of_the_input(env):
    data = make_log()
    out = squeez(["--backend", "bm25", "--json", "undefined reference error"], data, env)
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert {"spans", "kept_lines", "total_lines", "text", "pruned", "reason", "store_id"} <= payload.keys()
    source = data.decode().split("\n")
    assert payload["total_lines"] == len(source) and payload["pruned"] is True
    kept = [source[n - 1] for start, end in payload["spans"] for n in range(start, end + 1)]
    assert all(1 <= start <= end <= len(source) for start, end in payload["spans"])
    assert payload["kept_lines"] == len(kept) and payload["text"] == "\n".join(kept)
    shown = squeez(["show", payload["store_id"]], None, env)
    assert shown.returncode == 0 and shown.stdout == data


def test_markers_and_line_numbers_describe_the_cut(env):
    data = make_log()
    out = squeez(["--backend", "bm25", "--markers", "--line-numbers", "undefined reference"], data, env)
    assert out.returncode == 0, out.stderr
    lines, footer = answer_lines(out.stdout)
    source = data.decode().split("\n")
    shown = omitted = 0
    store_id = footer.decode().rsplit("squeez show ", 1)[1].rstrip("]")
    for line in map(bytes.decode, lines):
        if line.startswith("[squeez: "):  # [squeez: N lines omitted (A-B); squeez show ID --lines A-B]
            count, first, last = map(int, re.match(r"\[squeez: (\d+) lines? omitted \((\d+)-(\d+)\)", line).groups())
            assert line.endswith(f"; squeez show {store_id} --lines {first}-{last}]") and count == last - first + 1
            back = subprocess.run([str(SQUEEZ), "show", store_id, "--lines", f"{first}-{last}"], capture_output=True,
                                  env=env)
            assert back.stdout.decode().split("\n")[:-1] == source[first - 1:last], back.stderr
            omitted += count
        else:
            number, text = line.split(": ", 1)
            assert source[int(number) - 1] == text
            shown += 1
    assert shown + omitted == len(source) - 1  # the empty piece after the final newline is no line
    assert "\n42: ERROR module_42.c:17" in out.stdout.decode()  # numbers padded to the widest (61)


def test_backend_error_fails_open_and_strict_makes_it_an_error(env):
    data = make_log()
    out = squeez(["--backend", "boom", "q"], data, env, runner=True)
    assert out.returncode == 0
    assert out.stdout == data  # byte-exact, no footer
    assert b"engine exploded" in out.stderr and b"passed the full output through" in out.stderr
    strict = squeez(["--backend", "boom", "--strict", "q"], data, env, runner=True)
    assert strict.returncode == 1 and strict.stdout == b""
    assert b"engine exploded" in strict.stderr


def test_spans_outside_the_output_fail_open_instead_of_miscutting(env):
    data = make_log()
    out = squeez(["--backend", "wrong", "q"], data, env, runner=True)
    assert out.returncode == 0 and out.stdout == data
    assert b"out of range" in out.stderr


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has exited; only its parent has not collected it yet


def test_timeout_bounds_the_whole_call(env, tmp_path):
    data = make_log()
    pidfile = tmp_path / "child.pid"
    out = squeez(["--backend", "sleepy", "--timeout", "3", "q"], data, {**env, "TEST_CHILD_PIDFILE": str(pidfile)},
                 runner=True, timeout=60)
    assert out.returncode == 0 and out.stdout == data
    assert b"timed out after 3 s" in out.stderr
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 30  # SIGTERM is asynchronous: wait for it, generously
    while running(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running(child), "the backend's worker process outlived the command"
    strict = squeez(["--backend", "sleepy", "--timeout", "1", "--strict", "q"], data, env, runner=True, timeout=60)
    assert strict.returncode == 1 and strict.stdout == b""


def test_backend_output_on_stdout_goes_to_stderr(env):
    data = make_log()
    out = squeez(["--backend", "noisy", "q"], data, env, runner=True)
    assert out.returncode == 0, out.stderr
    kept, footer = answer_lines(out.stdout)
    assert kept == [b"ERROR module_42.c:17: undefined reference to `frobnicate'", b""]  # 61: empty last line
    assert b"engine log line" in out.stderr and b"child process log" in out.stderr


def test_short_outputs_pass_through_below_min_lines(env):
    data = b"a\nb\nERROR here\n"
    out = squeez(["--backend", "bm25", "error"], data, env)
    assert out.returncode == 0 and out.stdout == data and out.stderr == b""
    out = squeez(["--backend", "bm25", "--min-lines", "2", "error"], data, env)
    kept, _ = answer_lines(out.stdout)
    assert kept == [b"ERROR here"]


def test_show_is_byte_exact_for_crlf_invalid_utf8_and_no_final_newline(env):
    lines = [f"row {i}\r".encode() for i in range(30)] + [b"caf\xe9 latin-1 ERROR line\r", b"last \xff\xfe no newline"]
    data = b"\n".join(lines)
    out = squeez(["--backend", "bm25", "--keep-ratio", "0.05", "latin ERROR"], data, env)
    assert out.returncode == 0, out.stderr
    kept, footer = answer_lines(out.stdout)
    assert b"caf\xe9 latin-1 ERROR line\r" in kept  # the source's own bytes, not U+FFFD
    assert_subsequence(kept, data)
    ident = footer.decode().rsplit("squeez show ", 1)[1].rstrip("]")
    shown = squeez(["show", ident], None, env)
    assert shown.returncode == 0 and shown.stdout == data
    assert squeez(["show", ident[:6]], None, env).stdout == data  # a unique prefix is enough


def test_store_evicts_the_oldest_outputs(env, tmp_path):
    config = tmp_path / "squeez.yaml"
    config.write_text("store_max_mb: 0.01\n")  # ~10 KiB: room for two of the outputs below
    env = {**env, "SQUEEZ_CONFIG": str(config)}
    ids = []
    for i in range(3):
        data = make_log(120) + f"variant {i}\n".encode() * 50
        out = squeez(["--backend", "bm25", "error"], data, env)
        ids.append(answer_lines(out.stdout)[1].decode().rsplit(" ", 1)[1].rstrip("]"))
    assert len(set(ids)) == 3
    gone = squeez(["show", ids[0]], None, env)
    assert gone.returncode == 1 and b"evicted" in gone.stderr and gone.stdout == b""
    assert squeez(["show", ids[2]], None, env).returncode == 0
    assert sum(p.stat().st_size for p in Path(env["SQUEEZ_STORE"]).glob("*.out")) <= 0.01 * (1 << 20)


def test_show_errors_are_clear(env):
    out = squeez(["show", "abcdef123456"], None, env)
    assert out.returncode == 1 and b"no output with id abcdef123456" in out.stderr
    out = squeez(["show", "not-an-id"], None, env)
    assert out.returncode == 1 and b"is not a store id" in out.stderr
    assert b"Traceback" not in out.stderr


def test_query_show_is_possible_after_double_dash(env):
    out = squeez(["--backend", "bm25", "--min-lines", "1", "--", "show"], b"show me\nnothing\n", env)
    assert out.returncode == 0 and out.stdout.startswith(b"show me\n")


def test_environment_beats_config_file_and_flags_beat_environment(env, tmp_path):
    config = tmp_path / "squeez.yaml"
    config.write_text("backend: bm25\nmin_lines: 1000\n")
    data = make_log()
    base = {**env, "SQUEEZ_CONFIG": str(config)}
    assert squeez(["error"], data, base).stdout == data  # the file's min_lines: passed through
    from_env = squeez(["error"], data, {**base, "SQUEEZ_MIN_LINES": "5"})
    assert answer_lines(from_env.stdout)[1].startswith(b"[squeez: kept 6 of 61")
    from_flag = squeez(["--min-lines", "1000", "error"], data, {**base, "SQUEEZ_MIN_LINES": "5"})
    assert from_flag.stdout == data
    default_path = Path(env["HOME"]) / ".config" / "squeez" / "config.yaml"
    default_path.parent.mkdir(parents=True)
    default_path.write_text("backend: bm25\n")
    assert answer_lines(squeez(["error"], data, env).stdout)[1].endswith(b"]")  # found without SQUEEZ_CONFIG


def test_unknown_config_key_names_the_file_and_key(env, tmp_path):
    config = tmp_path / "squeez.yaml"
    config.write_text("backend: bm25\nbakend_url: http://x\n")
    data = make_log()
    out = squeez(["q"], data, {**env, "SQUEEZ_CONFIG": str(config)})
    assert out.returncode == 2
    assert str(config).encode() in out.stderr and b"bakend_url: unknown key" in out.stderr
    assert out.stdout == data  # a pipe never loses output
    bad_env = squeez(["--backend", "bm25", "q"], data, {**env, "SQUEEZ_MIN_LINES": "many"})
    assert bad_env.returncode == 2 and b"SQUEEZ_MIN_LINES='many': expected an integer" in bad_env.stderr


def test_a_model_without_a_backend_explains_and_passes_through(env, tmp_path):
    # (Nothing configured at all runs the shipped encoder: tests/integration/test_encoder_onnx.py.)
    data = make_log()
    out = squeez(["--model", str(tmp_path), "q"], data, env)
    assert out.returncode == 2 and out.stdout == data
    for hint in (b"--backend bm25", b"--model DIR", b"--server-url URL", b"SQUEEZ_BACKEND"):
        assert hint in out.stderr
    strict = squeez(["--strict", "--model", str(tmp_path), "q"], data, env)
    assert strict.returncode == 2 and strict.stdout == b""


@pytest.mark.parametrize("args, hint", [
    (["--backend", "vllm"], b"--model DIR"),
    (["--backend", "transformers", "--model", "/no/such/dir"], b"/no/such/dir does not exist"),
    (["--backend", "openai"], b"--server-url URL"),
    (["--backend", "bm26"], b"'bm26' is not a backend"),
])
def test_backend_without_what_it_needs_is_a_usage_error(env, args, hint):
    data = make_log()
    out = squeez(args + ["q"], data, env)
    assert out.returncode == 2 and hint in out.stderr and out.stdout == data


def test_missing_query_is_a_usage_error_that_keeps_the_output(env):
    data = make_log()
    out = squeez(["--backend", "bm25"], data, env)
    assert out.returncode == 2 and b"a query is required" in out.stderr and out.stdout == data


def test_empty_input(env):
    out = squeez(["--backend", "bm25", "q"], b"", env)
    assert out.returncode == 0 and out.stdout == b"" and b"empty input" in out.stderr
    as_json = json.loads(squeez(["--backend", "bm25", "--json", "q"], b"", env).stdout)
    assert as_json["total_lines"] == 0 and as_json["spans"] == [] and as_json["pruned"] is False


def test_binary_input_passes_through_untouched(env):
    data = bytes(range(256)) * 40 + b"\nmore\n" * 30
    out = squeez(["--backend", "bm25", "q"], data, env)
    assert out.returncode == 0 and out.stdout == data and b"binary input" in out.stderr
    as_json = json.loads(squeez(["--backend", "bm25", "--json", "q"], data, env).stdout)
    assert as_json["pruned"] is False and as_json["store_id"]  # JSON cannot hold the bytes: stored
    assert squeez(["show", as_json["store_id"]], None, env).stdout == data


def test_input_over_the_size_limit_is_streamed_through(env):
    data = make_log(5000)  # ~190 KB
    out = squeez(["--backend", "bm25", "--stats", "error"], data, {**env, "SQUEEZ_MAX_INPUT_MB": "0.05"})
    assert out.returncode == 0 and out.stdout == data
    assert b"over max_input_mb=0.05" in out.stderr


def test_stats_go_to_stderr(env):
    out = squeez(["--backend", "bm25", "--stats", "error"], make_log(), env)
    assert out.returncode == 0
    assert b"bm25 kept 6/61 lines" in out.stderr and b"tokens" in out.stderr and b" ms total" in out.stderr
    assert b"ms total" not in out.stdout


def test_closed_reader_is_not_an_error(env):
    data = make_log(20000)
    cmd = f"{SQUEEZ} --backend bm25 --min-lines 100000 q | head -1"  # pass-through of ~800 KB into head
    out = subprocess.run(["bash", "-c", cmd], input=data, capture_output=True, env=env, timeout=60)
    assert out.stdout == data.split(b"\n")[0] + b"\n"
    assert b"Traceback" not in out.stderr


def test_no_input_on_a_terminal_or_missing_file_is_a_usage_error(env, tmp_path):
    out = squeez(["--backend", "bm25", "--input-file", str(tmp_path / "nope.log"), "q"], None, env)
    assert out.returncode == 2 and b"cannot read --input-file" in out.stderr and b"Traceback" not in out.stderr


def test_an_unwritable_store_passes_through_and_says_so(env, tmp_path):
    blocker = tmp_path / "store-is-a-file"
    blocker.write_text("")
    out = squeez(["--backend", "bm25", "error"], make_log(), {**env, "SQUEEZ_STORE": str(blocker)})
    assert out.returncode == 0 and out.stdout == make_log()  # (--lossy prunes: test_cli_failopen.py)
    assert b"store: cannot write" in out.stderr
    no_store = squeez(["--backend", "bm25", "--no-store", "error"], make_log(), env)
    assert answer_lines(no_store.stdout)[1].endswith(b"full output not kept (store disabled)]")


def test_tool_type_hint_reaches_the_backend(env):
    data = make_log()
    out = squeez(["--backend", "typed", "--tool-type", "module_42.c", "q"], data, env, runner=True)
    assert answer_lines(out.stdout)[0] == [b"ERROR module_42.c:17: undefined reference to `frobnicate'"]
    from_env = squeez(["--backend", "typed", "q"], data, {**env, "SQUEEZ_TOOL_TYPE": "step 7:"}, runner=True)
    assert answer_lines(from_env.stdout)[0] == [b"INFO step 7: compiling module_7.c"]


def test_json_mode_answers_in_json_even_on_errors(env, tmp_path):
    data = make_log()
    unconfigured = squeez(["--json", "--model", str(tmp_path), "q"], data, env)
    assert unconfigured.returncode == 2
    payload = json.loads(unconfigured.stdout)
    assert payload["pruned"] is False and payload["text"] == data.decode()
    assert payload["reason"].startswith("no backend configured")
    failed = json.loads(squeez(["--backend", "boom", "--json", "q"], data, env, runner=True).stdout)
    assert failed["pruned"] is False and "engine exploded" in failed["reason"] and failed["text"] == data.decode()


def test_the_reader_gets_end_of_file_before_the_engine_shuts_down(env, tmp_path):
    release = tmp_path / "release"
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, "--backend", "slowclose", "--tool-type", "module_42", "q"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**env, "TEST_RELEASE_FILE": str(release)})
    try:
        proc.stdin.write(make_log())
        proc.stdin.close()
        answer: list[bytes] = []
        reader = threading.Thread(target=lambda: answer.append(proc.stdout.read()), daemon=True)
        reader.start()
        reader.join(timeout=60)  # a deadlock guard, not a speed check: close() waits for us
        assert answer, "stdout stayed open while the backend was shutting down"
        assert answer[0].startswith(b"ERROR module_42.c:17") and b"[squeez: kept 1 of 61 lines" in answer[0]
        release.touch()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()
