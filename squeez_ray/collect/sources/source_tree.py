"""Local sources -> real tool runs -> raw observations (the pluggable front of the sample data path).

A :class:`SourceTree` is any directory of code: this repository's checkout, an installed package in
site-packages, an unpacked sdist, a scratch project. ``plan_calls`` picks tool calls for a tree
from its own files (which files to read, which names to grep, which revisions to diff) within a
:class:`CallBudget`; ``run_calls`` runs them through the collection sandbox (``run_tool``) on a
small thread pool. Scaling up is a matter of passing more trees and a larger budget.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import random
import re
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceTree:
    name: str  # the repository name examples carry (the split group)
    path: Path
    has_git: bool = False
    runs_code: bool = False  # tests / imports may run here (never for site-packages: they would write caches)


@dataclass
class CallBudget:
    """Tool calls per tree and tool type (the rule teacher labels what comes back)."""
    read_file: int = 10  # tool calls of this type per source tree
    grep: int = 8  # tool calls of this type per source tree
    ls: int = 2  # tool calls of this type per source tree
    lint_output: int = 3  # calls per tree (ruff)
    type_check: int = 0  # calls per tree (mypy)
    git_log: int = 3  # tool calls of this type per git tree
    git_blame: int = 3  # tool calls of this type per git tree
    git_diff: int = 3  # tool calls of this type per git tree
    test_output: int = 6  # test files run (trees with runs_code only)
    python: int = 6  # imports / attribute lookups (trees with runs_code only)
    pip_install: int = 2  # trees with runs_code only
    build_output: int = 0  # trees with runs_code only (writes build/ into the tree)


@dataclass(frozen=True)
class PlannedCall:
    tree: SourceTree
    tool_type: str
    args: dict[str, Any]


def directory_tree(path: str | Path, name: str | None = None, *, runs_code: bool = False) -> SourceTree:
    """Any directory of code (a checkout, an unpacked sdist); git history is used when present."""
    path = Path(path).resolve()
    if not path.is_dir():
        raise FileNotFoundError(f"source directory {path} does not exist")
    return SourceTree(name or path.name, path, (path / ".git").exists(), runs_code)


def installed_package_trees(module_names: list[str]) -> list[SourceTree]:
    """The source folders of installed packages (by import name); names not installed are skipped."""
    trees = []
    for name in module_names:
        spec = importlib.util.find_spec(name)
        locations = list(spec.submodule_search_locations or []) if spec else []
        if not locations:
            log.info("package %s is not installed as a folder; skipped", name)
            continue
        trees.append(SourceTree(f"site-packages/{name}", Path(locations[0]).resolve()))
    return trees


_TOP_DEF = re.compile(r"^(?:async\s+def|def|class)\s+([A-Za-z_]\w{3,})", re.MULTILINE)
_SKIP_DIRS = {".git", "__pycache__", ".venv", "node_modules", "build", "dist", ".mypy_cache", ".pytest_cache"}


def _files(tree: SourceTree) -> list[str]:
    out = []
    # os.walk with pruning: a checkout's .venv or node_modules can hold more files than the project
    for root, dirs, names in os.walk(tree.path):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in names:
            path = Path(root) / name
            if not path.is_symlink():
                out.append(str(path.relative_to(tree.path)))
    return sorted(out)


def _line_count(path: Path) -> int:
    try:
        with path.open("rb") as handle:
            return sum(1 for _ in handle)
    except OSError:
        return 0


def _commit_count(tree: SourceTree) -> int:
    try:
        out = subprocess.run(["git", "-c", "safe.directory=*", "rev-list", "--count", "HEAD"], cwd=tree.path,
                             capture_output=True, text=True, timeout=20)
        return int(out.stdout.strip()) if out.returncode == 0 else 0
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return 0


def plan_calls(tree: SourceTree, budget: CallBudget, seed: int = 0) -> list[PlannedCall]:
    rng = random.Random(int(hashlib.sha256(f"{seed}:{tree.name}".encode()).hexdigest()[:8], 16))
    files = _files(tree)
    py = [f for f in files if f.endswith(".py")]
    readable = [f for f in files if f.endswith((".py", ".toml", ".cfg", ".md")) and 15 <= _line_count(tree.path / f) <= 600]
    tests = [f for f in py if Path(f).name.startswith("test_")]
    source = [f for f in py if f not in tests]
    # name -> the top folder of the file defining it: grep searches that folder, not the whole tree
    # (a checkout's root also holds virtualenvs and build outputs the agent would never grep)
    defined: dict[str, str] = {}
    for f in source[:300]:
        top = Path(f).parts[0] if len(Path(f).parts) > 1 else "."
        for name in _TOP_DEF.findall((tree.path / f).read_text(errors="replace")):
            defined.setdefault(name, top)
    names = sorted(defined)
    dirs = sorted({str(Path(f).parent) for f in files})

    def take(items: list, k: int) -> list:
        return rng.sample(items, min(k, len(items)))

    calls: list[tuple[str, dict[str, Any]]] = []
    calls += [("read_file", {"path": f}) for f in take(readable, budget.read_file)]
    calls += [("grep", {"pattern": n, "path": defined[n]}) for n in take(names, budget.grep)]
    calls += [("ls", {"path": d}) for d in take(dirs, budget.ls)]
    calls += [("lint_output", {"path": f}) for f in take(source, budget.lint_output)]
    calls += [("type_check", {"path": f}) for f in take(source, budget.type_check)]
    if tree.has_git:
        commits = _commit_count(tree)
        if commits > 2:
            calls += [("git_log", {"max_count": 12})]
            calls += [("git_log", {"max_count": 8, "path": d}) for d in take([d for d in dirs if d != "."],
                                                                                max(0, budget.git_log - 1))]
            calls += [("git_blame", {"path": f}) for f in take([f for f in readable if f.endswith(".py")],
                                                                 budget.git_blame)]
            depth = min(commits - 1, 60)
            calls += [("git_diff", {"base": f"HEAD~{k}", "head": f"HEAD~{k - 1}" if k > 1 else "HEAD"})
                      for k in take(list(range(1, depth + 1)), budget.git_diff)]
    if tree.runs_code:
        calls += [("test_output", {"tests": [f]}) for f in take(tests, budget.test_output)]
        modules = [f[:-3].replace("/", ".") for f in source if not f.endswith("__init__.py")]
        for module in take(modules, budget.python):
            roll = rng.random()
            attribute = "missing_helper" if roll < 0.4 else None
            calls.append(("python", {"module": module, **({"attribute": attribute} if attribute else {})}))
        pins = [f"{tree.name}-core==2.0", f"{tree.name}-plugins>=1.4", "."]
        calls += [("pip_install", {"target": t}) for t in pins[:budget.pip_install]]
        calls += [("build_output", {"path": "."})][:budget.build_output]
    return [PlannedCall(tree, tool, args) for tool, args in calls]


def run_calls(calls: list[PlannedCall], *, workers: int = 2, timeout_s: float = 60,
              max_output_bytes: int = 256 * 1024) -> tuple[list[dict[str, Any]], Counter]:
    """Run planned calls; returns observation rows (the raw-observation contract) and failure counts."""
    from squeez_ray.collect.tools import run_tool

    failures: Counter = Counter()

    def one(call: PlannedCall) -> dict[str, Any] | None:
        try:
            observed = run_tool(call.tool_type, call.args, call.tree.path, timeout_s=timeout_s,
                                max_output_bytes=max_output_bytes)
        except ValueError as error:  # unsafe or malformed arguments: counted, the call never ran
            failures[f"bad_args:{call.tool_type}"] += 1
            log.info("skipped %s %s on %s: %s", call.tool_type, call.args, call.tree.name, error)
            return None
        return {"instance_id": f"sample:{call.tree.name}", "repo": call.tree.name, "base_commit": None, **observed}

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(one, calls))
    return [r for r in results if r is not None], failures
