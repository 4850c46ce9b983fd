"""`squeez` never leaves an agent with nothing once the input is read (issue #15, items 3, 4, 6):
store eviction errors, non-finite size limits, an unwritable store, SIGINT, and `squeez show` under
a malformed config. Real subprocesses of the entry point, as in test_cli_prune.py."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from test_cli_prune import answer_lines, env, make_log, squeez, start_while_backend_works  # noqa: F401 - env is a fixture


def _stored_id(footer: bytes) -> str:
    return footer.rsplit(b"squeez show ", 1)[1].rstrip(b"]").decode()


def test_a_lock_that_is_a_directory_still_gives_the_answer_and_a_working_show(env, tmp_path):
    store = tmp_path / "store"
    (store / ".lock").mkdir(parents=True)
    out = squeez(["--backend", "bm25", "error"], make_log(), env)
    assert out.returncode == 0 and b"Traceback" not in out.stderr, out.stderr
    kept, footer = answer_lines(out.stdout)
    assert kept and b"squeez show " in footer
    assert b"evict" in out.stderr  # says why the store may grow
    assert squeez(["show", _stored_id(footer)], None, env).stdout == make_log()


def test_an_old_entry_that_cannot_be_deleted_does_not_cost_the_answer(env, tmp_path):
    store = tmp_path / "store"
    old = store / "sub"
    old.mkdir(parents=True)
    # An "entry" eviction cannot unlink (a directory with the store's suffix): an OSError on delete.
    (store / ("0" * 64 + ".out")).mkdir()
    (store / ("0" * 64 + ".out") / "x").write_bytes(b"x")
    os.utime(store / ("0" * 64 + ".out"), (1, 1))
    out = squeez(["--backend", "bm25", "error"], make_log(), {**env, "SQUEEZ_STORE_MAX_MB": "0.004"})
    assert out.returncode == 0 and b"Traceback" not in out.stderr, out.stderr
    kept, footer = answer_lines(out.stdout)
    assert kept and squeez(["show", _stored_id(footer)], None, env).stdout == make_log()


@pytest.mark.parametrize("value", [".inf", ".nan", "-.inf"])
@pytest.mark.parametrize("key", ["max_input_mb", "store_max_mb", "timeout_s"])
def test_non_finite_limits_are_config_errors_that_keep_the_output(env, tmp_path, key, value):
    config = tmp_path / "config.yaml"
    config.write_text(f"backend: bm25\n{key}: {value}\n")
    data = make_log()
    from_file = squeez(["--config", str(config), "error"], data, env)
    variable = {"timeout_s": "SQUEEZ_TIMEOUT"}.get(key, "SQUEEZ_" + key.upper())
    from_env = squeez(["--backend", "bm25", "error"], data, {**env, variable: value})
    for out, name in ((from_file, key), (from_env, variable)):
        assert out.returncode == 2 and b"Traceback" not in out.stderr, out.stderr
        assert out.stdout == data and name.encode() in out.stderr and b"finite" in out.stderr


def test_an_unwritable_store_passes_the_output_through_unless_lossy(env, tmp_path):
    blocker = tmp_path / "store-is-a-file"
    blocker.write_text("")
    data = make_log()
    out = squeez(["--backend", "bm25", "error"], data, {**env, "SQUEEZ_STORE": str(blocker)})
    assert out.returncode == 0 and out.stdout == data
    assert b"cannot be kept" in out.stderr and b"--lossy" in out.stderr
    as_json = json.loads(squeez(["--backend", "bm25", "--json", "error"], data,
                                {**env, "SQUEEZ_STORE": str(blocker)}).stdout)
    assert as_json["pruned"] is False and as_json["text"] == data.decode()
    lossy = squeez(["--backend", "bm25", "--lossy", "error"], data, {**env, "SQUEEZ_STORE": str(blocker)})
    kept, footer = answer_lines(lossy.stdout)
    assert lossy.returncode == 0 and len(kept) == 6 and b"full output not kept (store: cannot write" in footer
    from_env = squeez(["--backend", "bm25", "error"], data, {**env, "SQUEEZ_STORE": str(blocker), "SQUEEZ_LOSSY": "true"})
    assert answer_lines(from_env.stdout)[0] == kept


def test_a_read_only_home_passes_through(env, tmp_path):
    home = tmp_path / "ro-home"
    home.mkdir()
    home.chmod(0o500)
    try:
        clean = {k: v for k, v in env.items() if k != "SQUEEZ_STORE"} | {"HOME": str(home)}
        out = squeez(["--backend", "bm25", "error"], make_log(), clean)
    finally:
        home.chmod(0o700)
    if os.geteuid() == 0:
        pytest.skip("root writes into a read-only directory")
    assert out.returncode == 0 and out.stdout == make_log() and b"cannot be kept" in out.stderr


def test_sigint_while_the_backend_works_prints_the_input(env, tmp_path):
    data = make_log()
    proc = start_while_backend_works(data, env, tmp_path)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and stdout == data, stderr
    assert b"interrupted" in stderr and b"Traceback" not in stderr


def test_show_works_when_the_config_file_is_malformed(env, tmp_path):
    out = squeez(["--backend", "bm25", "error"], make_log(), env)
    ident = _stored_id(answer_lines(out.stdout)[1])
    config = tmp_path / "bad.yaml"
    config.write_text("backend: [unclosed\n")
    shown = squeez(["show", ident], None, {**env, "SQUEEZ_CONFIG": str(config)})
    assert shown.returncode == 0 and shown.stdout == make_log()
    assert b"ignored" in shown.stderr
