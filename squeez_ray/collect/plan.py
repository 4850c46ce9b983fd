"""Planning: which tool calls to run for one instance (3 to 7 by default), seeded and reproducible.

Calls aim at what the gold patch touches (files, hunk line ranges, enclosing functions, the failing
tests), at what the issue names (identifiers, file paths, URLs), or are decoys (unrelated files and
names), the mix an agent's real exploration has. The same seed, instance and file list always give
the same plan, so a resumed run re-plans exactly the calls it already ran and skips them.

Paths from patch or issue text are used only when they are tracked files of the repository at the
base commit (an issue that says ``../../etc/passwd`` plans nothing for it); executors check every path
again against the checked-out tree.
"""

from __future__ import annotations

import posixpath
import random
from dataclasses import dataclass, field
from typing import Any

from squeez_ray.collect.instances import issue_identifiers, issue_paths, issue_urls, parse_patch
from squeez_ray.collect.tools import TOOL_TYPES

# Relative frequency of each tool type, close to how often agents reach for them (file reads and
# searches dominate; builds, installs and network calls are rare).
DEFAULT_WEIGHTS = {"read_file": 3.0, "grep": 3.0, "test_output": 2.0, "git_log": 1.0, "git_blame": 1.0,
                   "git_diff": 1.0, "ls": 1.0, "python": 1.0, "type_check": 1.0, "lint_output": 1.0,
                   "coverage": 0.7, "build_output": 0.5, "pip_install": 0.5, "curl": 0.4}
_BUILD_FILES = ("pyproject.toml", "setup.py", "setup.cfg")


@dataclass
class ToolCall:
    tool_type: str
    args: dict[str, Any]
    aim: str  # "patch" | "issue" | "decoy"


@dataclass
class _Targets:
    """Everything the instance points at, each list in a stable order."""

    patch_files: list[str] = field(default_factory=list)
    patch_py: list[str] = field(default_factory=list)
    blame_ranges: list[dict[str, Any]] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)
    issue_files: list[str] = field(default_factory=list)
    identifiers: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    decoy_files: list[str] = field(default_factory=list)
    test_files: list[str] = field(default_factory=list)


def is_plain_relpath(path: str) -> bool:
    """A repository-relative path with no '..', no leading '/', '-' or '~' and no control characters."""
    return (bool(path) and not path.startswith(("/", "-", "~")) and "\\" not in path
            and all(ord(c) >= 32 for c in path) and ".." not in path.split("/"))


def module_name(path: str) -> str | None:
    """``src/pkg/mod.py`` -> ``pkg.mod``; None when the path is not an importable module name."""
    if not path.endswith(".py"):
        return None
    parts = path[:-3].split("/")
    if parts[0] in ("src", "lib") and len(parts) > 1:
        parts = parts[1:]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


def find_targets(instance: dict[str, Any], files: list[str]) -> _Targets:
    tracked = set(files)
    t = _Targets()
    patched = [f for f in parse_patch(instance.get("patch", "")) if is_plain_relpath(f.path)]
    for pf in patched:
        if pf.path in tracked and not pf.is_new:
            t.patch_files.append(pf.path)
            for start, length in pf.hunks:
                t.blame_ranges.append({"path": pf.path, "start": max(1, start - 3), "end": start + max(length, 1) + 3})
        t.functions += [name for name in pf.functions if name not in t.functions]
    t.patch_py = [p for p in t.patch_files if p.endswith(".py")]
    test_patch_files = [f.path for f in parse_patch(instance.get("test_patch", "")) if is_plain_relpath(f.path)]
    for node in instance.get("FAIL_TO_PASS", []):
        path = node.partition("::")[0]
        if is_plain_relpath(path) and (path in tracked or path in test_patch_files) and node not in t.tests:
            t.tests.append(node)
    t.test_files = [p for p in files if posixpath.basename(p).startswith("test") and p.endswith(".py")]
    if not t.tests:
        t.tests = [p for p in test_patch_files if p.endswith(".py")]
    problem = instance.get("problem_statement", "")
    for mentioned in issue_paths(problem):
        # Exact tracked path, or a unique tracked file ending with what the issue wrote ("ops.py").
        matches = [mentioned] if mentioned in tracked else [p for p in files if p.endswith("/" + mentioned)]
        if len(matches) == 1 and matches[0] not in t.issue_files and is_plain_relpath(matches[0]):
            t.issue_files.append(matches[0])
    t.identifiers = issue_identifiers(problem)
    t.urls = issue_urls(problem)
    touched = set(t.patch_files) | set(t.issue_files) | set(test_patch_files)
    t.decoy_files = [p for p in files if p not in touched and is_plain_relpath(p)]
    return t


def _grep_pattern(name: str) -> str:
    return name.rsplit(".", 1)[-1] if "." in name else name  # grep for the leaf of calc.ops.divide


def _candidates(tool_type: str, t: _Targets, files: list[str], repo: str, history_depth: int,
                test_patch_files: list[str]) -> dict[str, list]:
    """Argument sets per aim for one tool type; an empty dict means the tool does not apply."""
    decoy_py = [p for p in t.decoy_files if p.endswith(".py")] or t.decoy_files
    dirs = sorted({posixpath.dirname(p) or "." for p in files})
    has_build = any(name in files for name in _BUILD_FILES)
    name = repo.split("/")[-1]
    issue_py = [p for p in t.issue_files if p.endswith(".py")]
    other_tests = [p for p in t.test_files if p not in {n.partition("::")[0] for n in t.tests}]
    c: dict[str, list] = {}
    if tool_type == "read_file":
        c = {"patch": [{"path": p} for p in t.patch_files], "issue": [{"path": p} for p in t.issue_files],
             "decoy": [{"path": p} for p in decoy_py]}
    elif tool_type == "grep":
        c = {"patch": [{"pattern": f} for f in t.functions], "issue": [{"pattern": _grep_pattern(i)} for i in t.identifiers],
             "decoy": [{"pattern": posixpath.splitext(posixpath.basename(p))[0]} for p in decoy_py
                       if len(posixpath.splitext(posixpath.basename(p))[0]) >= 3]}
    elif tool_type == "git_log":
        c = {"patch": [{"path": p} for p in t.patch_files], "issue": [{"path": p} for p in t.issue_files],
             "decoy": [{}]}
    elif tool_type == "git_blame":
        c = {"patch": t.blame_ranges or [{"path": p} for p in t.patch_files],
             "issue": [{"path": p} for p in t.issue_files], "decoy": [{"path": p} for p in decoy_py]}
    elif tool_type == "git_diff":
        # Targeted: the tree's uncommitted changes (the applied test patch, as after an agent's edit);
        # decoy: recent history, which rarely touches the patched code.
        bases = [f"HEAD~{k}" for k in range(1, min(3, history_depth - 1) + 1)]
        c = {"patch": [{"path": p} for p in test_patch_files] if test_patch_files else [],
             "decoy": [{"base": b} for b in bases]}
    elif tool_type == "ls":
        c = {"patch": [{"path": posixpath.dirname(p) or "."} for p in t.patch_files],
             "issue": [{"path": posixpath.dirname(p) or "."} for p in t.issue_files], "decoy": [{"path": d} for d in dirs]}
    elif tool_type == "python":
        def calls(paths: list[str], attrs: list[str]) -> list[dict[str, Any]]:
            out = []
            for p in paths:
                module = module_name(p)
                if module:
                    out += [{"module": module, "attribute": a} for a in attrs] + [{"module": module}]
            return out

        c = {"patch": calls(t.patch_py, t.functions[:2]), "issue": calls(issue_py, []), "decoy": calls(decoy_py, [])}
    elif tool_type in ("test_output", "coverage"):
        c = {"patch": [{"tests": t.tests[:5]}] if t.tests else [], "decoy": [{"tests": [p]} for p in other_tests]}
    elif tool_type in ("type_check", "lint_output"):
        c = {"patch": [{"path": p} for p in t.patch_py], "issue": [{"path": p} for p in issue_py],
             "decoy": [{"path": p} for p in decoy_py]}
        if tool_type == "lint_output":
            c["decoy"] += [{"path": d} for d in dirs if d != "."]
    elif tool_type == "pip_install" and has_build:
        c = {"patch": [{"target": "."}], "decoy": [{"target": name}] if _plain_name(name) else []}
    elif tool_type == "build_output" and has_build:
        c = {"patch": [{}]}
    elif tool_type == "curl":
        c = {"issue": [{"url": u} for u in t.urls],
             "decoy": [{"url": f"https://pypi.org/pypi/{name}/json"}] if _plain_name(name) else []}
    return {aim: args for aim, args in c.items() if args}


def _plain_name(name: str) -> bool:
    return name.replace("-", "").replace("_", "").replace(".", "").isalnum()


def plan_calls(instance: dict[str, Any], files: list[str], *, seed: int, history_depth: int = 1,
               min_calls: int = 3, max_calls: int = 7, tool_types: tuple[str, ...] | list[str] = TOOL_TYPES,
               weights: dict[str, float] | None = None, decoy_rate: float = 0.25) -> list[ToolCall]:
    """The tool calls for ``instance`` over the repository ``files`` at its base commit.

    Between ``min_calls`` and ``max_calls`` calls, tool types drawn without replacement by weight
    (so with ``max_calls >= len(tool_types)`` every applicable type appears), then cycled if more are
    asked for. Each call aims at the patch or the issue, or with probability ``decoy_rate`` is a decoy.
    """
    rng = random.Random(f"{seed}:{instance['instance_id']}")
    files = sorted(files)
    targets = find_targets(instance, files)
    weights = {**DEFAULT_WEIGHTS, **(weights or {})}
    test_patch_files = [f.path for f in parse_patch(instance.get("test_patch", "")) if is_plain_relpath(f.path)]
    options = {tt: _candidates(tt, targets, files, instance["repo"], history_depth, test_patch_files)
               for tt in tool_types}
    applicable = [tt for tt in tool_types if options[tt] and weights.get(tt, 0) > 0]
    if not applicable:
        return []
    wanted = rng.randint(min_calls, max_calls)
    # Weighted sampling without replacement (Efraimidis-Spirakis keys): diverse plans, common tools first.
    order = sorted(applicable, key=lambda tt: -(rng.random() ** (1.0 / weights[tt])))
    plan: list[ToolCall] = []
    seen: set[str] = set()
    attempts = 0
    while len(plan) < wanted and attempts < wanted * 4:
        tool_type = order[attempts % len(order)]
        attempts += 1
        by_aim = options[tool_type]
        targeted = [aim for aim in ("patch", "issue") if aim in by_aim]
        if "decoy" in by_aim and (not targeted or rng.random() < decoy_rate):
            aim = "decoy"
        else:
            aim = targeted[0] if len(targeted) == 1 or rng.random() < 0.6 else targeted[1]
        args = rng.choice(by_aim[aim])
        key = f"{tool_type}:{sorted(args.items())!r}"
        if key in seen:
            continue
        seen.add(key)
        plan.append(ToolCall(tool_type, dict(args), aim))
    return plan
