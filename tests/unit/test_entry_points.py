"""Entry points: each flag group is declared once, and argv is read only by entry points (jobs/, cli/).

A flag that two commands share comes from one declaration (``cli/args.add_pruning_flags`` for the pipe
and ``squeez run``; ``runner.add_worker_arguments`` for ``squeez eval`` and ``jobs/reprune.py``;
``infer/registry.add_backend_arguments`` for every backend flag), so its help, default and type cannot
drift apart again: a second, hand-written copy of any of them fails the comparison below.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _job(name: str):
    spec = importlib.util.spec_from_file_location(f"job_{name}", REPO / "jobs" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _declarations(parser: argparse.ArgumentParser) -> dict[str, tuple]:
    """Each option string -> everything its declaration sets (what two copies would differ in)."""
    return {option: (type(action).__name__, action.dest, action.default, action.type, action.choices,
                     action.nargs, action.const, action.help, action.metavar, action.required)
            for action in parser._actions for option in action.option_strings}


def _parsers() -> dict[str, argparse.ArgumentParser]:
    from squeez_ray.cli import args, eval, run

    return {"squeez": args.build_parser(), "squeez run": run.build_parser(), "squeez eval": eval.build_parser(),
            "jobs/reprune.py": _job("reprune").build_parser()}


@pytest.mark.parametrize("one, other", [("squeez", "squeez run"), ("squeez eval", "jobs/reprune.py")])
def test_a_flag_two_commands_share_is_declared_once(one, other):
    parsers = _parsers()
    first, second = _declarations(parsers[one]), _declarations(parsers[other])
    shared = sorted(set(first) & set(second))
    assert len(shared) > 10  # the comparison is about something: the backend group at least
    if other == "jobs/reprune.py":
        assert {"--workers", "--cpus-per-worker", "--gpus-per-worker", "--config"} <= set(shared)
    assert [flag for flag in shared if first[flag] != second[flag]] == []


def test_the_backend_flags_are_declared_by_the_registry_alone():
    from squeez_ray.infer.registry import add_backend_arguments

    group = argparse.ArgumentParser(add_help=False)
    add_backend_arguments(group)
    expected = _declarations(group)
    for name, parser in _parsers().items():
        got = _declarations(parser)
        differ = [flag for flag in expected if got.get(flag) != expected[flag]]
        assert differ == [], f"{name} declares {differ} itself"


# Only entry points read the command line: the cli/ package (the `squeez` command), runner.py (the
# jobs' shared parsing) and jobs/*.py. A library module takes its inputs as arguments.
ENTRY_POINTS = ("cli/", "runner.py")


def _reads_argv(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"line {node.lineno}: imports argparse" for n in names if n == "argparse"]
        elif isinstance(node, ast.Attribute) and node.attr == "argv" and isinstance(node.value, ast.Name) \
                and node.value.id == "sys":
            found.append(f"line {node.lineno}: reads sys.argv")
    return found


def test_no_library_module_parses_the_command_line():
    package = REPO / "squeez_ray"
    offenders = {}
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        if relative.startswith(ENTRY_POINTS):
            continue
        found = _reads_argv(ast.parse(path.read_text(encoding="utf-8")))
        if found:
            offenders[relative] = found
    assert offenders == {}


def test_a_shared_count_from_a_config_is_checked_like_the_flag(tmp_path, capsys):
    # --workers / --examples-per-batch must be at least 1 on the command line (positive_int); a key=value
    # word or a --config YAML skips argparse's conversion, so the runner applies the same rule to it.
    from squeez_ray.cli.eval import build_parser
    from squeez_ray.runner import parse_flags

    for word in ("examples_per_batch=0", "workers=-2"):
        with pytest.raises(SystemExit) as exit_:
            parse_flags(build_parser(), ["--data", "d.jsonl", "--out", str(tmp_path), word])
        assert exit_.value.code == 2 and "must be at least 1" in capsys.readouterr().err


def test_the_squeez_commands_take_config_and_store_dir_from_one_declaration():
    from squeez_ray.cli import daemon, mcp_server, report, show

    parsers = {**_parsers(), "squeez show": show.build_parser(), "squeez report": report.build_parser(),
               "squeez mcp": mcp_server.build_parser(), "squeez daemon": daemon.build_parser()}
    for flag, owners in (("--config", ["squeez", "squeez run", "squeez show", "squeez report", "squeez mcp",
                                       "squeez daemon"]), ("--store-dir", ["squeez", "squeez run", "squeez show"])):
        declared = {name: _declarations(parsers[name])[flag] for name in owners}
        assert len(set(declared.values())) == 1, declared


# jobs/evaluate.py is `squeez eval` under its own prog: one command, run by cli/eval.py's main.
SAME_AS_A_COMMAND = {"evaluate.py"}


def test_every_job_has_one_shape():
    """A job is ``main(argv)`` handing a parser and a work function to ``runner.run_job`` (one error path,
    exit codes, summary), and reads argv only through it."""
    odd = {}
    for path in sorted((REPO / "jobs").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
        mains = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "main"]
        problems = [] if mains and mains[0].args.args and mains[0].args.args[0].arg == "argv" else ["no main(argv)"]
        problems += [] if "run_job" in calls or path.name in SAME_AS_A_COMMAND else ["does not call run_job"]
        problems += [found for found in _reads_argv(tree) if "sys.argv" in found]
        if problems:
            odd[path.name] = problems
    assert odd == {}
