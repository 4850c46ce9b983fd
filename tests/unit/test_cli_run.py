"""`squeez run QUERY -- CMD`: the command's output pruned with recoverable markers, and its exit code.

Real subprocesses of the entry point and real commands (bash); the BM25 baseline is the backend,
plus the test-only exploding backend of test_cli_prune's runner for fail-open.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from test_cli_prune import RUNNER, SQUEEZ, env  # noqa: F401 - env is a fixture

from squeez_ray.cli.failure_lines import failure_line_numbers, is_failure_line
from squeez_ray.cli.markers import LinesError, parse_line_range, render_marked, select_lines

MARKER = re.compile(r"^\[squeez: (\d+) lines? omitted \((\d+)-(\d+)\); squeez show (\w+) --lines (\d+)-(\d+)\]$")

# A test run: 60 passing lines, the failure on stderr, the summary, exit 3.
TEST_RUN = ('for i in $(seq 1 60); do echo "tests/test_$i.py::test_ok PASSED"; done; '
            'echo "tests/test_x.py::test_bad FAILED" >&2; echo "E       assert 1 == 2"; '
            'echo "=== 1 failed, 60 passed in 0.4s ==="; exit 3')


def run(args: list[str], env: dict, runner: bool = False, **kwargs) -> subprocess.CompletedProcess:  # noqa: F811
    cmd = [sys.executable, "-c", RUNNER] if runner else [str(SQUEEZ)]
    return subprocess.run(cmd + ["run", *args], capture_output=True, env=env, timeout=120, **kwargs)


def rebuild(stdout: bytes, env: dict) -> bytes:  # noqa: F811
    """The original output, from the answer: every marker replaced by what `squeez show --lines` prints."""
    lines = stdout.decode().rstrip("\n").split("\n")
    assert lines[-1].startswith("[squeez: kept "), stdout
    out = []
    for line in lines[:-1]:
        match = MARKER.match(line)
        if match:
            count, first, last, ident, first2, last2 = match.groups()
            assert (first, last) == (first2, last2) and int(count) == int(last) - int(first) + 1
            shown = subprocess.run([str(SQUEEZ), "show", ident, "--lines", f"{first}-{last}"], capture_output=True,
                                   env=env, check=True)
            out.append(shown.stdout.decode())
        else:
            out.append(line + "\n")
    return "".join(out).encode()


def test_run_prunes_with_markers_that_give_every_line_back_and_keeps_the_exit_code(env):  # noqa: F811
    out = run(["--backend", "bm25", "which test failed", "--", "bash", "-c", TEST_RUN], env)
    assert out.returncode == 3, out.stderr
    text = out.stdout.decode()
    assert "omitted" in text and "tests/test_x.py::test_bad FAILED" in text
    full = subprocess.run(["bash", "-c", TEST_RUN], stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout
    assert len(out.stdout) < len(full) // 2
    assert rebuild(out.stdout, env) == full  # stdout and stderr, every line back, in order


def test_stdout_and_stderr_arrive_in_the_order_they_were_written(env):  # noqa: F811
    script = "for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; done"
    out = run(["--backend", "bm25", "q", "--", "bash", "-c", script], env)  # 10 lines: below min_lines
    assert out.returncode == 0
    assert out.stdout == b"".join(f"out{i}\nerr{i}\n".encode() for i in range(1, 6))  # passed through, exact


@pytest.mark.parametrize(("script", "code"), [("exit 0", 0), ("exit 7", 7), ("kill -TERM $$", 143),
                                              ("kill -KILL $$", 137)])
def test_exit_code_is_the_commands_and_a_signal_gives_128_plus_n(env, script, code):  # noqa: F811
    assert run(["--backend", "bm25", "q", "--", "bash", "-c", "echo hi; " + script], env).returncode == code


def test_safety_net_keeps_the_failure_lines_the_model_dropped_only_when_the_command_failed(env):  # noqa: F811
    query = ["--backend", "bm25", "--keep-ratio", "0.02", "tests test_44 passed"]
    failed = run([*query, "--", "bash", "-c", TEST_RUN], env)
    assert failed.returncode == 3
    kept = failed.stdout.decode()
    assert "=== 1 failed, 60 passed" in kept and "E       assert 1 == 2" in kept and "test_bad FAILED" in kept
    assert "+3 failure lines" in kept.rsplit("\n", 2)[-2]
    passed = run([*query, "--", "bash", "-c", TEST_RUN.replace("exit 3", "exit 0")], env)
    assert passed.returncode == 0 and "assert 1 == 2" not in passed.stdout.decode()  # success: the model decides


def test_backend_failure_and_broken_config_pass_the_output_through_with_the_exit_code(env, tmp_path):  # noqa: F811
    merged = subprocess.run(["bash", "-c", TEST_RUN], stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout
    boom = run(["--backend", "boom", "q", "--", "bash", "-c", TEST_RUN], env, runner=True)
    assert boom.returncode == 3 and b"engine exploded" in boom.stderr and boom.stdout == merged
    config = tmp_path / "bad.yaml"
    config.write_text("backend: nope\n")
    broken = run(["--config", str(config), "q", "--", "bash", "-c", TEST_RUN], env)
    assert broken.returncode == 3 and b"config error" in broken.stderr and broken.stdout == merged


def test_a_backend_timeout_passes_the_output_through_and_ends_the_process(env):  # noqa: F811
    out = run(["--backend", "sleepy", "--timeout", "2", "q", "--", "bash", "-c", TEST_RUN], env, runner=True)
    merged = subprocess.run(["bash", "-c", TEST_RUN], stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout
    assert out.returncode == 3 and out.stdout == merged and b"timed out after 2 s" in out.stderr


def test_output_over_max_input_mb_streams_through_unchanged(env):  # noqa: F811
    env = {**env, "SQUEEZ_MAX_INPUT_MB": "0.01"}  # 10 KiB
    out = run(["--backend", "bm25", "q", "--", "bash", "-c", "seq 1 5000; exit 4"], env)
    assert out.returncode == 4 and out.stdout == subprocess.run(["seq", "1", "5000"], capture_output=True).stdout
    assert b"max_input_mb" in out.stderr


@pytest.mark.parametrize(("args", "code", "message"), [
    (["q", "--", "no-such-command-xyz"], 127, b"no-such-command-xyz: command not found"),
    (["q", "no-such-command-xyz"], 2, b"the `--` before the command is required"),
    (["q", "--"], 2, b"no command after"),
    (["  ", "--", "true"], 2, b"the query is empty"),
])
def test_run_usage_errors_are_one_line(env, args, code, message):  # noqa: F811
    out = run(args, env)
    assert out.returncode == code and message in out.stderr and b"Traceback" not in out.stderr


def test_show_lines_rejects_ranges_outside_the_output(env):  # noqa: F811
    out = run(["--backend", "bm25", "which test failed", "--", "bash", "-c", TEST_RUN], env)
    ident = out.stdout.decode().rsplit("squeez show ", 1)[1].rstrip("]\n")
    for bad, message in (("60-64", b"out of range: output " + ident.encode() + b" has 63 lines"),
                         ("5-2", b"need 1 <= A <= B"), ("x", b"expected A-B")):
        shown = subprocess.run([str(SQUEEZ), "show", ident, "--lines", bad], capture_output=True, env=env)
        assert shown.returncode == 2 and message in shown.stderr and not shown.stdout, (bad, shown.stderr)


# -- the pure parts ---------------------------------------------------------------------------------


def test_select_lines_is_byte_exact_with_and_without_a_final_newline():
    assert select_lines(b"a\nb\r\nc\n", 2, 3) == b"b\r\nc\n"
    assert select_lines(b"a\nb\nc", 3, 3) == b"c"
    assert select_lines(b"a\n\xff\nc", 2, 2) == b"\xff\n"
    with pytest.raises(LinesError, match="has 3 lines"):
        select_lines(b"a\nb\nc\n", 3, 4)
    assert parse_line_range(" 120-531 ") == (120, 531) and parse_line_range("7") == (7, 7)


def test_render_marked_names_every_dropped_stretch_and_never_the_final_empty_piece():
    lines = [f"l{i}" for i in range(1, 11)] + [""]
    text = render_marked(lines, [[3, 4], [10, 11]], "abc123")
    assert text.split("\n") == ["[squeez: 2 lines omitted (1-2); squeez show abc123 --lines 1-2]", "l3", "l4",
                                "[squeez: 5 lines omitted (5-9); squeez show abc123 --lines 5-9]", "l10"]
    assert render_marked(lines, [[1, 1]], None).endswith("[squeez: 9 lines omitted (2-10); full output not kept]")


def test_failure_lines_rule():
    lines = ["collecting", *[f"ok {i}" for i in range(30)], "Traceback (most recent call last):",
             '  File "a.py", line 3, in f', "ValueError: bad value", "", "error: build failed", ""]
    assert failure_line_numbers(lines, 0) == [] and failure_line_numbers(lines, None) == []
    assert [lines[n - 1] for n in failure_line_numbers(lines, 1)] == ["ValueError: bad value", "error: build failed"]
    many = [f"src/x.py:{i}: error: bad" for i in range(50)]
    assert len(failure_line_numbers(many, 1)) == 10  # capped
    for line in ("E       assert 3 == 2", "FAILED tests/a.py::t - x", "error[E0308]: mismatched types",
                 "java.lang.IllegalStateException: x", "make: *** [all] Error 2", "thread 'main' panicked at x",
                 "Tests: 2 failed, 5 passed", "bash: foo: command not found",
                 "tests/test_invoice.py:12: AssertionError"):
        assert is_failure_line(line), line
    for line in ("def error_handler(request):", "all 12 tests passed", "  File \"a.py\", line 3"):
        assert not is_failure_line(line), line


def _options(parser) -> dict[str, tuple]:
    """Each option string with what it does: dest, action, default, choices."""
    return {option: (action.dest, type(action).__name__, action.default, action.choices)
            for action in parser._actions for option in action.option_strings}


def test_the_pipe_and_run_accept_the_same_pruning_flags():
    """One declaration (args.add_pruning_flags) serves both, so a flag added to one cannot miss the other."""
    import argparse

    from squeez_ray.cli import args, run

    shared = _options(_with_pruning_flags(argparse.ArgumentParser(add_help=False)))
    pipe, wrapped = _options(args.build_parser()), _options(run.build_parser())
    assert {"--backend", "--config", "--line-numbers", "--tool-type", "--store-dir", "--lossy", "--model"} <= set(shared)
    assert shared.items() <= pipe.items()
    assert wrapped.keys() - {"-h", "--help"} == shared.keys() and shared.items() <= wrapped.items()
    words = ["--backend", "bm25", "--no-line-numbers", "--tool-type", "pytest", "--store-dir", "s", "--lossy",
             "--keep-ratio", "0.5"]
    from_pipe = vars(args.build_parser().parse_args([*words, "q"]))
    from_run = {k: v for k, v in vars(run.build_parser().parse_args([*words, "q"])).items() if k != "query"}
    assert from_run and {k: from_pipe[k] for k in from_run} == from_run


def _with_pruning_flags(parser):
    from squeez_ray.cli.args import add_pruning_flags

    add_pruning_flags(parser)
    return parser
