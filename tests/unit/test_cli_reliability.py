"""`squeez` keeps the piped output under the abuse of issue #28: a command line long enough to crash
onnxruntime's import, usage mistakes, signals, configs nested too deeply, tampered store entries.
Real subprocesses of the entry point and real signals, as in test_cli_prune.py."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest
from test_cli_prune import (SQUEEZ, answer_lines, default_signals, env, make_log, squeez,  # noqa: F401 - env is a fixture
                            start_while_backend_works)


def passed_log(n: int = 300) -> bytes:
    return "".join(f"tests/t{i}.py PASSED\n" for i in range(1, n + 1)).encode()


def test_a_query_longer_than_32_kb_still_gets_an_answer_from_the_default_encoder(env):
    # The command line, not the query, crashed `import onnxruntime` (exit 139, nothing printed).
    out = squeez(["q" * 33_000], passed_log(), env)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert b"(encoder" in answer_lines(out.stdout)[1]


# -- usage mistakes (item 2) --------------------------------------------------------------------------

def test_an_unquoted_multi_word_query_is_read_as_one_query(env):
    data = make_log()
    quoted = squeez(["--backend", "bm25", "undefined reference error"], data, env)
    unquoted = squeez(["--backend", "bm25", "undefined", "reference", "error"], data, env)
    assert unquoted.returncode == 0 and unquoted.stdout == quoted.stdout, unquoted.stderr
    assert b"read as one query: 'undefined reference error'" in unquoted.stderr


@pytest.mark.parametrize("args", [["--bogus", "q"], ["--timeout", "30s", "q"], ["q", "--min-lines"],
                                  ["--backend", "bm25", "--keep-ratio", "x", "error"]])
def test_a_usage_error_passes_the_output_through_and_exits_2(env, args):
    data = make_log()
    out = squeez(args, data, env)
    assert out.returncode == 2 and out.stdout == data, out.stderr
    assert b"Traceback" not in out.stderr and b"usage:" not in out.stderr
    assert b"squeez --help" in out.stderr and b"passed through unpruned" in out.stderr


def test_a_usage_error_keeps_the_flags_that_were_readable(env, tmp_path):
    data = make_log()
    as_json = squeez(["--json", "--bogus", "q"], data, env)
    payload = json.loads(as_json.stdout)
    assert as_json.returncode == 2 and payload["pruned"] is False and payload["text"] == data.decode()
    path = tmp_path / "build.log"
    path.write_bytes(data)
    from_file = squeez(["--input-file", str(path), "--bogus", "q"], None, env)
    assert from_file.returncode == 2 and from_file.stdout == data
    strict = squeez(["--strict", "--bogus", "q"], data, env)
    assert strict.returncode == 2 and strict.stdout == b"" and b"--bogus" in strict.stderr


# -- signals (item 3) ---------------------------------------------------------------------------------

@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_while_the_backend_works_print_the_input(env, tmp_path, signum):
    data = make_log()
    proc = start_while_backend_works(data, env, tmp_path)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum and stdout == data, stderr
    assert signal.Signals(signum).name.encode() in stderr and b"Traceback" not in stderr


def test_under_nohup_sighup_stays_ignored_and_sigterm_still_prints_the_input(env, tmp_path):
    """`nohup cmd | squeez ...`: SIGHUP was ignored on purpose, so squeez keeps ignoring it (the hang-up
    of the terminal must not end the run); SIGTERM still passes the input through."""
    data = make_log()
    proc = start_while_backend_works(data, env, tmp_path, sighup=signal.SIG_IGN)
    proc.send_signal(signal.SIGHUP)
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=3)  # still working: a handled SIGHUP ends it at once (see the test above)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM and stdout == data, stderr
    assert b"SIGHUP" not in stderr and b"SIGTERM" in stderr


def test_sigint_while_the_producer_still_writes_prints_what_was_read(env):
    """A hung `pytest | squeez`: Ctrl-C must not lose what was already piped."""
    proc = subprocess.Popen([str(SQUEEZ), "--backend", "bm25", "q"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, preexec_fn=default_signals)
    got: dict[str, bytes] = {}
    readers = [threading.Thread(target=lambda k=k, f=f: got.__setitem__(k, f.read()))
               for k, f in (("out", proc.stdout), ("err", proc.stderr))]
    for reader in readers:
        reader.start()
    written = passed_log(40_000)  # ~1 MB: more than a pipe holds
    proc.stdin.write(written)
    proc.stdin.flush()  # returns once squeez has taken all but at most one pipe's worth
    pipe_size = fcntl.fcntl(proc.stdin.fileno(), 1032)  # F_GETPIPE_SZ
    proc.send_signal(signal.SIGINT)
    returncode = proc.wait(timeout=60)
    proc.stdin.close()
    for reader in readers:
        reader.join(timeout=60)
    assert returncode == 130, got["err"]
    # All but what was still in the pipe, and at most one piece read at the instant of the signal.
    assert written.startswith(got["out"]) and len(got["out"]) >= len(written) - 2 * pipe_size, len(got["out"])
    assert b"bytes read so far passed through unpruned" in got["err"] and b"Traceback" not in got["err"]


# -- configs nested too deeply (item 4) ---------------------------------------------------------------

@pytest.mark.parametrize("nested", ["a: " + "[" * 3000 + "]" * 3000 + "\n",
                                    "".join("  " * i + f"k{i}:\n" for i in range(3000)) + "  " * 3000 + "x: 1\n"],
                         ids=["flow", "block"])
def test_a_deeply_nested_config_is_a_config_error_that_keeps_the_output_and_show(env, tmp_path, nested):
    ident = answer_lines(squeez(["--backend", "bm25", "error"], make_log(), env).stdout)[1]
    ident = ident.rsplit(b"squeez show ", 1)[1].rstrip(b"]").decode()
    config = tmp_path / "nested.yaml"
    config.write_text(nested)
    data = make_log()
    out = squeez(["--config", str(config), "error"], data, env)
    assert out.returncode == 2 and out.stdout == data, out.stderr[-2000:]
    assert b"nested too deeply" in out.stderr and b"Traceback" not in out.stderr
    shown = squeez(["show", ident], None, {**env, "SQUEEZ_CONFIG": str(config)})
    assert shown.returncode == 0 and shown.stdout == make_log() and b"Traceback" not in shown.stderr


# -- squeez show: only what squeez kept, and one line when stdout fails (item 5) ------------------------

def _keep(env) -> tuple[str, Path]:
    footer = answer_lines(squeez(["--backend", "bm25", "error"], make_log(), env).stdout)[1]
    ident = footer.rsplit(b"squeez show ", 1)[1].rstrip(b"]").decode()
    return ident, next(Path(env["SQUEEZ_STORE"]).glob(ident + "*.out"))


def test_show_refuses_an_entry_that_does_not_match_its_id(env):
    ident, entry = _keep(env)
    entry.write_bytes(make_log().replace(b"ERROR", b"OK   "))
    shown = squeez(["show", ident], None, env)
    assert shown.returncode == 1 and shown.stdout == b"" and b"does not match its id" in shown.stderr


def test_show_refuses_a_symlinked_entry_even_with_the_right_name(env, tmp_path):
    ident, entry = _keep(env)
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_bytes(make_log())  # the same bytes: the name's hash matches, the link is still refused
    entry.unlink()
    entry.symlink_to(elsewhere)
    shown = squeez(["show", ident], None, env)
    assert shown.returncode == 1 and shown.stdout == b"" and b"symbolic link" in shown.stderr


def test_show_to_a_full_disk_or_a_closed_stdout_is_one_line(env):
    ident, _ = _keep(env)
    with open("/dev/full", "wb") as full:
        out = subprocess.run([str(SQUEEZ), "show", ident], stdout=full, stderr=subprocess.PIPE, env=env, timeout=60,
                             check=False)
    assert out.returncode == 1 and out.stderr == b"squeez: cannot print the output: No space left on device\n"
    closed = subprocess.run([str(SQUEEZ), "show", ident], stderr=subprocess.PIPE, env=env, timeout=60,
                            preexec_fn=lambda: os.close(1), check=False)
    assert closed.returncode == 1 and closed.stderr == b"squeez: cannot print the output: stdout is closed\n"


# -- limits and model references on the command line (item 5) ------------------------------------------

@pytest.mark.parametrize("args", [["--min-lines", "-5"], ["--batch-size", "-1"], ["--max-context-tokens", "-5"],
                                  ["--keep-ratio", "-0.5"], ["--keep-ratio", "2"], ["--fuzzy-threshold", "-1"],
                                  ["--threshold", "-1"]])
def test_negative_or_out_of_range_limits_are_refused_and_the_output_passes_through(env, args):
    data = make_log()
    out = squeez(["--backend", "bm25", *args, "error"], data, env)
    name = args[0].lstrip("-").replace("-", "_").encode()
    assert out.returncode == 2 and out.stdout == data, out.stderr
    assert name + b": must be" in out.stderr and b"Traceback" not in out.stderr


def test_a_relative_model_path_with_a_typo_is_not_looked_up_on_the_hub(env, tmp_path):
    (tmp_path / "runs").mkdir()
    data = make_log()
    out = subprocess.run([str(SQUEEZ), "--backend", "encoder", "--model", "runs/typo", "error"], input=data,
                         capture_output=True, cwd=tmp_path, env={**env, "HF_HUB_OFFLINE": "1"}, timeout=120,
                         check=False)
    assert out.returncode == 2 and out.stdout == data, out.stderr
    assert b"runs/typo does not exist" in out.stderr and b"Hugging Face" not in out.stderr


def test_resolve_model_reads_a_reference_into_a_local_folder_as_a_path(tmp_path, monkeypatch):
    from squeez_ray.hub import ModelNotFoundError, is_hub_id, resolve_model

    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert is_hub_id("Org/name") and not is_hub_id("runs/typo")
    with pytest.raises(ModelNotFoundError, match="no such checkpoint directory"):
        resolve_model("runs/typo", what="--model")


def test_json_over_max_input_mb_streams_the_output_while_the_input_still_arrives(env):
    """Bounded: the answer starts once the cap + 1 byte is read, not at end of input (`yes | squeez --json`)."""
    proc = subprocess.Popen([str(SQUEEZ), "--backend", "bm25", "--json", "q"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**env, "SQUEEZ_MAX_INPUT_MB": "0.25"})
    chunks: list[bytes] = []
    answering = threading.Event()

    def read_stdout() -> None:
        while piece := proc.stdout.read1(1 << 16):
            chunks.append(piece)
            if sum(map(len, chunks)) >= 200_000:
                answering.set()

    reader = threading.Thread(target=read_stdout)
    reader.start()
    first = passed_log(40_000)  # ~1 MB, four times the cap; the producer stays open after it
    proc.stdin.write(first)
    proc.stdin.flush()
    # A squeez that reads to the end of input before answering has written nothing yet.
    assert answering.wait(timeout=60), "no answer while the input was still open"
    second = "".join(f"late line {i}\n" for i in range(1000)).encode() + "é".encode()
    proc.stdin.write(second)
    proc.stdin.close()
    reader.join(timeout=60)
    stderr = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, stderr
    payload = json.loads(b"".join(chunks))
    data = first + second
    assert payload["text"] == data.decode() and payload["pruned"] is False
    assert payload["total_lines"] == payload["kept_lines"] == data.count(b"\n") + 1
    assert payload["spans"] == [[1, data.count(b"\n") + 1]] and payload["store_id"] is None
    assert "max_input_mb" in payload["reason"]
