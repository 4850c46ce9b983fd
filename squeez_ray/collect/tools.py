"""One small executor per tool type: turn checked arguments into an argv, run it in the sandbox.

All 14 tool types of the Squeez data engine have an executor here. Executors work on any directory
(a git checkout at a commit, an unpacked sdist, a copy of an installed package); tools that need git
history simply report git's own error elsewhere, which is still a real observation.

Arguments come from repository and issue text, so each executor checks them before building the
argv: paths through :func:`safe_relpath`, names and revisions against narrow patterns, URLs to
http(s). Nothing is ever interpolated into a shell string; the one executor that uses ``sh -c``
(coverage: run, then report) passes all data as positional parameters (``"$@"``).

``run_tool`` is the public entry point, also used outside the collection job (sample data, encoder
data): ``run_tool("grep", {"pattern": "parse_args"}, "/path/to/tree")``.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squeez_ray.collect.sandbox import UnsafePathError, run_sandboxed, safe_relpath

TOOL_TYPES = ("read_file", "grep", "git_log", "git_blame", "git_diff", "ls", "python", "test_output", "pip_install",
              "type_check", "lint_output", "build_output", "coverage", "curl")


class ToolArgsError(ValueError):
    """Arguments a tool cannot run with (unknown tool type, missing or malformed argument)."""


@dataclass
class Context:
    worktree: Path
    home: Path  # private HOME/TMPDIR of this call
    cache_dir: Path  # tool caches that may outlive the call (mypy); never inside the worktree


@dataclass
class Command:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_REV = re.compile(r"^(HEAD|[0-9a-f]{7,40})(~[0-9]{1,3})?$")
_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,100}((==|>=|<=|~=|!=|<|>)[A-Za-z0-9.*+!-]{1,40})?$")
_URL = re.compile(r"^https?://[^\s\x00-\x1f\x7f]{1,2000}$")


def _arg(args: dict[str, Any], name: str, default: Any = None, *, required: bool = False) -> Any:
    value = args.get(name, default)
    if required and value in (None, "", []):
        raise ToolArgsError(f"argument {name!r} is required")
    return value


def _path(ctx: Context, args: dict[str, Any], name: str = "path", default: str | None = None) -> str:
    value = _arg(args, name, default, required=True)
    if not isinstance(value, str):
        raise ToolArgsError(f"argument {name!r} must be a path string, got {value!r}")
    return safe_relpath(ctx.worktree, value)


def _tests(ctx: Context, args: dict[str, Any]) -> list[str]:
    """pytest node ids (``path::name[param]``) or paths, each path part checked; at most 20."""
    tests = _arg(args, "tests", required=True)
    if isinstance(tests, str) or not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
        raise ToolArgsError(f"argument 'tests' must be a list of pytest node ids, got {tests!r}")
    out = []
    for test in tests[:20]:
        path, sep, rest = test.partition("::")
        if any(ord(c) < 32 for c in rest):
            raise UnsafePathError(f"test id {test!r} holds control characters")
        out.append(safe_relpath(ctx.worktree, path) + sep + rest)
    return out


def _python_env(ctx: Context) -> dict[str, str]:
    # Import the project from its own tree (src/ layout or flat), not from whatever is installed.
    paths = [str(ctx.worktree / "src")] if (ctx.worktree / "src").is_dir() else []
    return {"PYTHONPATH": ":".join([*paths, str(ctx.worktree)])}


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def read_file(args: dict[str, Any], ctx: Context) -> Command:
    return Command(["cat", "-n", "--", _path(ctx, args)])


def grep(args: dict[str, Any], ctx: Context) -> Command:
    pattern = _arg(args, "pattern", required=True)
    if not isinstance(pattern, str) or len(pattern) > 200 or "\n" in pattern or "\0" in pattern:
        raise ToolArgsError(f"argument 'pattern' must be one line of at most 200 characters, got {pattern!r}")
    mode = "-F" if args.get("fixed", True) else "-E"  # fixed strings: issue text is not a regex
    return Command(["grep", "-rnI", mode, "--exclude-dir=.git", "-e", pattern, "--", _path(ctx, args, default=".")])


def git_log(args: dict[str, Any], ctx: Context) -> Command:
    count = int(_arg(args, "max_count", 10))
    argv = ["git", "log", f"--max-count={max(1, min(count, 100))}", "--stat", "--date=short", "--no-color"]
    if args.get("path"):
        argv += ["--", _path(ctx, args)]
    return Command(argv)


def git_blame(args: dict[str, Any], ctx: Context) -> Command:
    argv = ["git", "blame", "--date=short"]
    start, end = args.get("start"), args.get("end")
    if start is not None:
        start, end = int(start), int(end if end is not None else start)
        if start < 1 or end < start:
            raise ToolArgsError(f"line range {start},{end} is not 1 <= start <= end")
        argv.append(f"-L{start},{end}")
    return Command([*argv, "--", _path(ctx, args)])


def git_diff(args: dict[str, Any], ctx: Context) -> Command:
    """Without ``base``: the uncommitted changes (what an agent sees after editing); with it: base..head."""
    argv = ["git", "diff", "--no-color"]
    if args.get("base"):
        base, head = str(args["base"]), str(_arg(args, "head", "HEAD"))
        for rev in (base, head):
            if not _REV.match(rev):
                raise ToolArgsError(f"revision {rev!r} is not HEAD or a hex commit id, optionally with ~N")
        argv += [base, head]
    if args.get("path"):
        argv += ["--", _path(ctx, args)]
    return Command(argv)


def ls(args: dict[str, Any], ctx: Context) -> Command:
    return Command(["ls", "-la", "--", _path(ctx, args, default=".")])


# Imports the module named in argv[1] (never interpolated) and prints its documentation, or that of
# the dotted attribute in argv[2]; a failing import prints its real traceback.
_PYTHON_SNIPPET = """\
import importlib, pydoc, sys
module = importlib.import_module(sys.argv[1])
print(sys.argv[1], "from", getattr(module, "__file__", None))
target = module
for part in sys.argv[2].split(".") if len(sys.argv) > 2 else []:
    target = getattr(target, part)
print(pydoc.render_doc(target, renderer=pydoc.plaintext))
"""


def python(args: dict[str, Any], ctx: Context) -> Command:
    module = _arg(args, "module", required=True)
    attribute = args.get("attribute")
    for name in (module, attribute) if attribute else (module,):
        if not isinstance(name, str) or not _MODULE.match(name):
            raise ToolArgsError(f"{name!r} is not a dotted Python name")
    return Command(["python", "-c", _PYTHON_SNIPPET, module, *([attribute] if attribute else [])], _python_env(ctx))


def test_output(args: dict[str, Any], ctx: Context) -> Command:
    # The interpreter is squeez-ray's: its own test plugins (xdist, hypothesis, schemathesis, ...) are not the
    # project's, and autoloading them cost ~3 s of CPU a run (the quickstart's sample makes 24) for the same output.
    return Command(["python", "-m", "pytest", "-q", "--tb=short", "-p", "no:cacheprovider", *_tests(ctx, args)],
                   {**_python_env(ctx), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})


def pip_install(args: dict[str, Any], ctx: Context) -> Command:
    target = _arg(args, "target", ".")
    if not isinstance(target, str):
        raise ToolArgsError(f"argument 'target' must be text, got {target!r}")
    if target == "." or "/" in target:
        target = safe_relpath(ctx.worktree, target)
        target = target if target.startswith(".") else f"./{target}"
    elif not _REQUIREMENT.match(target):
        raise ToolArgsError(f"target {target!r} is neither a path in the tree nor a requirement like 'name==1.0'")
    # Offline on purpose: --no-index, and PIP_CONFIG_FILE=/dev/null drops any configured find-links.
    return Command(["python", "-m", "pip", "install", "--dry-run", "--no-index", "--no-build-isolation", target])


def type_check(args: dict[str, Any], ctx: Context) -> Command:
    path = _path(ctx, args)
    if _installed("mypy"):
        # MYPY_CACHE_DIR keeps the cache out of the tree and out of the argv (stable commands for resume).
        return Command(["python", "-m", "mypy", "--ignore-missing-imports", "--follow-imports=silent",
                        "--show-column-numbers", "--no-color-output", path],
                       {"MYPY_CACHE_DIR": str(ctx.cache_dir / "mypy"), **_python_env(ctx)})
    return Command(["python", "-m", "py_compile", path])


def lint_output(args: dict[str, Any], ctx: Context) -> Command:
    path = _path(ctx, args, default=".")
    if _installed("ruff"):
        return Command(["python", "-m", "ruff", "check", "--no-cache", "--output-format=full", path])
    if _installed("pyflakes"):
        return Command(["python", "-m", "pyflakes", path])
    return Command(["python", "-m", "py_compile", path])


def build_output(args: dict[str, Any], ctx: Context) -> Command:
    # -v shows the backend's own build log; the wheel goes to the private HOME (PIP_WHEEL_DIR), offline.
    return Command(["python", "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-v",
                    safe_relpath(ctx.worktree, _arg(args, "path", "."))], {"PIP_WHEEL_DIR": str(ctx.home / "wheels")})


_COVERAGE_SCRIPT = 'python -m coverage run -m pytest -q --tb=short -p no:cacheprovider "$@"; python -m coverage report -m'


def coverage(args: dict[str, Any], ctx: Context) -> Command:
    # Data file in the private HOME: a run never reads or leaves a .coverage in the tree.
    return Command(["sh", "-c", _COVERAGE_SCRIPT, "coverage", *_tests(ctx, args)],
                   {"COVERAGE_FILE": str(ctx.home / ".coverage"), **_python_env(ctx)})


def curl(args: dict[str, Any], ctx: Context) -> Command:
    url = _arg(args, "url", required=True)
    if not isinstance(url, str) or not _URL.match(url):
        raise ToolArgsError(f"url {url!r} is not an http(s) URL without spaces or control characters")
    # --proto keeps curl off file://, and --url keeps a URL from being read as an option.
    return Command(["curl", "-sS", "-i", "--max-time", "10", "--proto", "=http,https", "--max-redirs", "3",
                    "--url", url])


EXECUTORS: dict[str, Callable[[dict[str, Any], Context], Command]] = {
    "read_file": read_file, "grep": grep, "git_log": git_log, "git_blame": git_blame, "git_diff": git_diff,
    "ls": ls, "python": python, "test_output": test_output, "pip_install": pip_install, "type_check": type_check,
    "lint_output": lint_output, "build_output": build_output, "coverage": coverage, "curl": curl,
}
assert set(EXECUTORS) == set(TOOL_TYPES)


def build_command(tool_type: str, args: dict[str, Any], worktree: str | Path, *, home: str | Path = "/nonexistent",
                  cache_dir: str | Path | None = None) -> Command:
    """The command ``run_tool`` would run, without running it (planning, resume keys, dry runs).

    Raises ToolArgsError or UnsafePathError (both ValueError) for arguments that must not run.
    """
    if tool_type not in EXECUTORS:
        raise ToolArgsError(f"unknown tool_type {tool_type!r} (choose one of {', '.join(TOOL_TYPES)})")
    if not isinstance(args, dict):
        raise ToolArgsError(f"args must be a mapping, got {type(args).__name__}")
    home = Path(home)
    ctx = Context(Path(worktree), home, Path(cache_dir) if cache_dir else home / "cache")
    return EXECUTORS[tool_type](args, ctx)


def run_tool(tool_type: str, args: dict[str, Any], worktree: str | Path, timeout_s: float = 60,
             max_output_bytes: int = 1 << 20, *, cache_dir: str | Path | None = None,
             isolate_network: bool = True) -> dict[str, Any]:
    """Run one tool in the sandbox over ``worktree`` (any directory) and return its observation fields:
    ``tool_type, command`` (shlex-joined argv)``, exit_code, duration_s, tool_output, truncated, error``.

    ``error`` is set when the run is not a normal tool run (timeout, could not start); a tool that ran
    and failed (non-zero exit) is a normal observation. Raises ToolArgsError / UnsafePathError (both
    ValueError) before running anything when the arguments are unsafe or malformed. Some tools write
    into ``worktree`` (build_output's build/ and egg-info); pass a copy when it must stay untouched.
    """
    worktree = Path(worktree)
    if not worktree.is_dir():
        raise ToolArgsError(f"worktree {worktree} is not a directory")
    home = Path(tempfile.mkdtemp(prefix="squeez-tool-"))
    try:
        command = build_command(tool_type, args, worktree, home=home, cache_dir=cache_dir)
        result = run_sandboxed(command.argv, worktree, timeout_s=timeout_s, max_output_bytes=max_output_bytes,
                               env_extra=command.env, home=home, isolate_network=isolate_network)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return {
        "tool_type": tool_type,
        "command": shlex.join(result.argv),
        "exit_code": result.exit_code,
        "duration_s": round(result.duration_s, 4),
        "tool_output": result.output,
        "truncated": result.truncated,
        "error": result.error,
    }
