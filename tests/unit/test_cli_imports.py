"""`squeez` must start without the heavy stack (torch, ray, vllm, transformers, pyarrow, pandas): the plain
`pip install squeez-ray` does not have it (tests/integration/test_light_install.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("torch", "ray", "vllm", "transformers", "pyarrow", "pandas")


def imported_modules(args: list[str], stdin: bytes, env: dict, expect: str = "squeez_ray.cli.prune") -> set[str]:
    """Modules the real entry point imported (from CPython's own -X importtime trace)."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "squeez_ray.cli", *args], input=stdin,
                         capture_output=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    names = set()
    for line in out.stderr.decode().splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    assert expect in names  # the trace really was read
    return names


@pytest.mark.parametrize("args, backend_module", [
    # The default: the shipped encoder on ONNX Runtime.
    ([], "onnxruntime"),
    # bm25 is pure Python since issue 36 item 6: test_bm25_prunes_without_loading_numpy_or_scipy covers it.
    # The fake engine runs the whole generative path (chunking, parsing, fuzzy mapping).
    (["--backend", "fake"], "squeez_ray.infer.generative"),
    # A server client: the server's tokenizer is not loaded locally. (Port 9 is discard: fails fast.)
    (["--backend", "openai", "--server-url", "http://127.0.0.1:9", "--server-model", "m"], "openai"),
])
def test_pruning_without_a_local_model_imports_no_heavy_package(tmp_path, args, backend_module):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUEEZ_")}
    env.update(HOME=str(tmp_path), SQUEEZ_STORE=str(tmp_path / "store"), SQUEEZ_MAX_RETRIES="0", SQUEEZ_DAEMON="0")
    log = "\n".join(f"line {i}" for i in range(100)).encode() + b"\nERROR here\n"
    names = imported_modules([*args, "--stats", "error"], log, env)
    assert backend_module in names  # the backend really ran
    top_level = {name.split(".")[0] for name in names}
    assert not top_level & set(HEAVY), sorted(top_level & set(HEAVY))


def test_run_and_report_import_no_heavy_package(tmp_path, trajectories_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUEEZ_")}
    env.update(HOME=str(tmp_path), SQUEEZ_STORE=str(tmp_path / "store"), SQUEEZ_DAEMON="0")
    names = imported_modules(["run", "error", "--", "seq", "1", "100"], b"", env, expect="squeez_ray.cli.run")
    assert "onnxruntime" in names  # the command's output was pruned by the shipped encoder
    names |= imported_modules(["report", "--backend", "bm25", "--limit", "30", str(trajectories_dir)], b"", env,
                              expect="squeez_ray.trajectories.claude_code")
    top_level = {name.split(".")[0] for name in names}
    assert not top_level & set(HEAVY), sorted(top_level & set(HEAVY))


@pytest.mark.parametrize("module", ["squeez_ray.cli", "squeez_ray.cli.mcp_server", "squeez_ray.cli.report",
                                    "squeez_ray.cli.run", "squeez_ray.cli.hooks.claude_code",
                                    "squeez_ray.trajectories.detect"])
def test_import_cli_is_light(module):
    code = "import sys, %s; print(sorted(m for m in %r if m in sys.modules))" % (module, HEAVY)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_a_backend_whose_extra_is_missing_names_the_extra(tmp_path):
    # As in the plain install: torch / vllm cannot be imported (None in sys.modules blocks the import).
    code = ("import sys; sys.modules['torch'] = sys.modules['vllm'] = None\n"
            "from squeez_ray.infer.registry import BackendError, build_pruner\n"
            "for name in ('transformers', 'vllm'):\n"
            "    try:\n"
            "        build_pruner(name, model=%r)\n"
            "    except BackendError as error:\n"
            "        print(error)\n") % str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "backend transformers needs torch, which this install lacks: pip install 'squeez-ray[train]'" in out.stdout
    assert "backend vllm needs vllm, which this install lacks: pip install 'squeez-ray[cpu]' (or" in out.stdout


def test_squeez_eval_without_the_ray_extra_names_it(tmp_path):
    code = ("import sys; sys.modules['pyarrow'] = None\n"
            "from squeez_ray.cli import main\n"
            "sys.exit(main(['eval', '--data', %r, '--system', 'bm25', '--out', %r]))") % (
        str(tmp_path / "cases.jsonl"), str(tmp_path / "out"))
    (tmp_path / "cases.jsonl").write_text("")
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.strip() == ("squeez eval: needs pyarrow, which this install lacks: "
                                  "pip install 'squeez-ray[ray]'")


# What a pruner's runtime costs to load (0.3-1 s together): a call that prunes nothing must not pay it.
RUNTIME = ("numpy", "onnxruntime", "tokenizers", "bm25s", "scipy")
LOADED_AT_EXIT = """
import json, sys
from squeez_ray.cli import main
code = main(sys.argv[1:])
sys.stderr.write("\\nLOADED=" + json.dumps(sorted({m.split(".")[0] for m in sys.modules} & set(%r))) + "\\n")
sys.exit(code)
""" % (RUNTIME,)


def loaded_at_exit(args: list[str], stdin: bytes, env: dict) -> list[str]:
    """The runtime packages in sys.modules when the real entry point has answered."""
    out = subprocess.run([sys.executable, "-c", LOADED_AT_EXIT, *args], input=stdin, capture_output=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stderr.decode().rsplit("LOADED=", 1)[1])


@pytest.mark.parametrize("daemon", ["0", "1"])
@pytest.mark.parametrize("case, args, stdin", [
    ("hook, wrapped", ["hook", "claude-code"],
     b'{"tool_name": "Bash", "tool_input": {"command": "pytest -q", "description": "run the tests"}}'),
    ("hook, left alone", ["hook", "codex"], b'{"tool_name": "Bash", "tool_input": {"command": "ls"}}'),
    ("short", ["which test failed"], b"1 passed\n2 passed\n3 failed\n"),
    ("empty", ["which test failed"], b""),
    ("binary", ["which test failed"], b"\x7fELF\x00\x01" + b"line\n" * 100),
    ("run, short", ["run", "which test failed", "--", "seq", "3"], b""),
    ("bm25, short", ["--backend", "bm25", "which test failed"], b"1 passed\n2 failed\n"),
], ids=lambda value: value if isinstance(value, str) else "")
def test_a_call_that_prunes_nothing_loads_no_pruner_runtime(tmp_path, case, args, stdin, daemon):
    """The default backend (the encoder) is configured; the daemon on or off changes nothing here."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUEEZ_")}
    env.update(HOME=str(tmp_path), XDG_RUNTIME_DIR=str(tmp_path), SQUEEZ_STORE=str(tmp_path / "store"),
               SQUEEZ_DAEMON=daemon)
    assert loaded_at_exit(args, stdin, env) == []
    assert not (tmp_path / "squeez").exists() or not any((tmp_path / "squeez").glob("*.sock"))  # none started


def test_bm25_prunes_without_loading_numpy_or_scipy(tmp_path):
    """`squeez --backend bm25` is pure Python (issue 36 item 6): bm25s pulled numpy and scipy into its start."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQUEEZ_")}
    env.update(HOME=str(tmp_path), XDG_RUNTIME_DIR=str(tmp_path), SQUEEZ_STORE=str(tmp_path / "store"), SQUEEZ_DAEMON="0")
    log = b"".join(b"tests/t%d.py PASSED\n" % i for i in range(300)) + b"tests/t_cfg.py FAILED\n"
    assert loaded_at_exit(["--backend", "bm25", "--stats", "which test failed"], log, env) == []
