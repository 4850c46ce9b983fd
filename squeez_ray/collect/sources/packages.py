"""Real open-source packages as data sources: PyPI sdists -> unpacked trees -> real tool runs.

The package-scale front of the self-contained data path (``jobs/build_encoder_data.py``):

1. ``fetch``: ``pip download --no-deps --no-binary :all: NAME==VERSION`` into a cache (a wheel when
   the sdist cannot be had); an archive already in the cache is never fetched again.
2. ``unpack``: each archive into ``cache/src/NAME-VERSION`` (safe extraction, no links out).
3. ``worktree``: a fresh copy per package under ``cache/work`` that tools may write into (pytest,
   pip wheel), with generated failing tests that import the package and call it wrongly (real
   tracebacks from the package's own frames) and, when an older version is listed, a git history:
   the old release as one commit, then the new release file by file (real ``git log/blame/diff``).
4. ``observe``: the labelling helper's ``plan_calls`` / ``run_calls`` over the tree; one JSONL of raw
   observations per package, written atomically, so an interrupted build resumes where it stopped.

Tests pass already-installed packages' folders (``local_dir``) so they never touch the network.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squeez_ray.collect.sources.source_tree import CallBudget, PlannedCall, SourceTree, plan_calls, run_calls

log = logging.getLogger(__name__)

GENERATED_TEST = "test_squeez_generated_usage.py"


@dataclass
class PackageSpec:
    name: str  # PyPI name
    version: str
    old_version: str | None = None  # also fetched: the tree gets a git history from old to new
    local_dir: str | None = None  # an already-present source folder instead of PyPI (tests, offline)

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"


def _archives(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.suffix in (".gz", ".zip", ".whl", ".bz2")) \
        if directory.is_dir() else []


def fetch(name: str, version: str, cache: Path, *, timeout_s: float = 300) -> Path:
    """The sdist (else a wheel) of NAME==VERSION in ``cache/dists/NAME-VERSION``; cached."""
    target = cache / "dists" / f"{name}-{version}"
    found = _archives(target)
    if found:
        return found[0]
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    errors = []
    for mode in (["--no-binary", ":all:"], ["--only-binary", ":all:"]):
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q",
                   *mode, "-d", str(staging), f"{name}=={version}"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            errors.append(f"{' '.join(mode)}: timed out after {timeout_s:.0f}s")
            continue
        if done.returncode == 0 and _archives(staging):
            staging.rename(target) if not target.exists() else None
            return _archives(target)[0]
        errors.append(f"{' '.join(mode)}: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    shutil.rmtree(staging, ignore_errors=True)
    raise RuntimeError(f"pip download {name}=={version} failed: {'; '.join(errors)}")


def unpack(archive: Path, dest: Path) -> Path:
    """Extract ``archive`` into ``dest`` and return its source root (the single top folder of an sdist)."""
    if not dest.exists():
        staging = dest.with_name(dest.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        if archive.suffix in (".zip", ".whl"):
            with zipfile.ZipFile(archive) as zf:
                for member in zf.namelist():
                    if member.startswith("/") or ".." in Path(member).parts:
                        raise RuntimeError(f"{archive}: unsafe member {member!r}")
                zf.extractall(staging)
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(staging, filter="data")  # refuses absolute paths, links out, devices
        staging.rename(dest)
    entries = [p for p in dest.iterdir() if not p.name.startswith(".")]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else dest


def import_names(root: Path) -> list[str]:
    """Top-level importable names of a source tree (flat or src/ layout), packages first."""
    base = root / "src" if (root / "src").is_dir() else root
    packages = sorted(p.name for p in base.iterdir() if p.is_dir() and (p / "__init__.py").exists()
                      and p.name.isidentifier() and p.name not in ("tests", "test", "docs", "testing"))
    modules = sorted(p.stem for p in base.glob("*.py") if p.stem.isidentifier()
                     and p.stem not in ("setup", "conftest", "noxfile", "tasks") and not p.stem.startswith("test"))
    return packages + modules


def _public_functions(root: Path, module: str) -> list[str]:
    base = root / "src" if (root / "src").is_dir() else root
    source = base / module / "__init__.py" if (base / module).is_dir() else base / f"{module}.py"
    try:
        tree = ast.parse(source.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return []
    return sorted(node.name for node in tree.body if isinstance(node, ast.FunctionDef)
                  and not node.name.startswith("_"))


def generated_tests(module: str, functions: list[str], package: str) -> str:
    """A test module that imports the package and calls it wrongly: real failures, real tracebacks.

    Each test pins a wrong expectation (a nonsense argument, a made-up version), as a developer's
    half-finished test would; one test passes so the report is a realistic mix.
    """
    lines = [f'"""Usage checks for {package} (generated by squeez-ray\'s data builder)."""', "",
             f"import {module}", "", "",
             "def test_module_imports():", f"    assert {module} is not None", "", "",
             "def test_version_pinned():",
             f"    assert getattr({module}, '__version__', None) == '0.0.0-pinned'", ""]
    for name in functions[:6]:
        lines += ["", f"def test_{name}_with_unexpected_arguments():",
                  f"    result = {module}.{name}(object(), None, -1, key='unexpected')",
                  "    assert result == {'status': 'ok'}", ""]
    lines += ["", "def test_missing_helper():", f"    assert {module}.squeez_missing_helper() == 1", ""]
    return "\n".join(lines)


def _git(cwd: Path, *args: str, date: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Release Bot", "GIT_AUTHOR_EMAIL": "release@example.org",
           "GIT_COMMITTER_NAME": "Release Bot", "GIT_COMMITTER_EMAIL": "release@example.org",
           "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "GIT_CONFIG_GLOBAL": "/dev/null"}
    subprocess.run(["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args], cwd=cwd,
                   env=env, check=True, capture_output=True, timeout=120)


def git_history(old_root: Path, new_root: Path, dest: Path, name: str, old: str, new: str,
                max_commits: int = 25) -> None:
    """``dest`` becomes a git repo: release ``old``, then ``new`` applied in per-file commits."""
    shutil.copytree(old_root, dest, symlinks=False)
    _git(dest, "init", "-q", date="2024-01-01T10:00:00")
    _git(dest, "add", "-A", date="2024-01-01T10:00:00")
    _git(dest, "commit", "-q", "-m", f"Release {name} {old}", date="2024-01-01T10:00:00")
    old_files = {str(p.relative_to(old_root)) for p in old_root.rglob("*") if p.is_file()}
    new_files = {str(p.relative_to(new_root)) for p in new_root.rglob("*") if p.is_file()}
    changed = sorted(f for f in new_files if f not in old_files
                     or (old_root / f).read_bytes() != (new_root / f).read_bytes())
    removed = sorted(old_files - new_files)
    # Group changed files so the history has at most ``max_commits`` commits, one folder per group.
    groups: dict[str, list[str]] = {}
    for f in changed:
        groups.setdefault(str(Path(f).parent), []).append(f)
    batches = [files for _, files in sorted(groups.items())]
    while len(batches) > max_commits:
        batches = [batches[i] + (batches[i + 1] if i + 1 < len(batches) else []) for i in range(0, len(batches), 2)]
    for day, files in enumerate(batches, start=2):
        for f in files:
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(new_root / f, dest / f)
        date = f"2024-01-{min(day, 28):02d}T12:00:00"
        _git(dest, "add", "-A", date=date)
        verb = "Add" if all(f not in old_files for f in files) else "Update"
        _git(dest, "commit", "-q", "--allow-empty", "-m", f"{verb} {', '.join(files[:3])}"
             + (f" and {len(files) - 3} more" if len(files) > 3 else ""), date=date)
    for f in removed:
        (dest / f).unlink(missing_ok=True)
    _git(dest, "add", "-A", date="2024-01-29T12:00:00")
    _git(dest, "commit", "-q", "--allow-empty", "-m", f"Release {name} {new}", date="2024-01-29T12:00:00")


def prepare_tree(spec: PackageSpec, cache: Path) -> SourceTree:
    """A fresh writable worktree for ``spec`` (fetching and unpacking into the cache as needed)."""
    def source(version: str) -> Path:
        if spec.local_dir and version == spec.version:
            return Path(spec.local_dir)
        archive = fetch(spec.name, version, cache)
        return unpack(archive, cache / "src" / f"{spec.name}-{version}")

    new_root = source(spec.version)
    work = cache / "work" / spec.key
    shutil.rmtree(work, ignore_errors=True)
    work.parent.mkdir(parents=True, exist_ok=True)
    has_git = False
    if spec.old_version:
        git_history(source(spec.old_version), new_root, work, spec.name, spec.old_version, spec.version)
        has_git = True
    else:
        shutil.copytree(new_root, work, symlinks=False, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    names = import_names(work)
    if names:  # generated tests sit beside the package (not committed: they are a developer's local edit)
        module = names[0]
        (work / GENERATED_TEST).write_text(generated_tests(module, _public_functions(work, module), spec.name))
    return SourceTree(f"pypi/{spec.name}", work, has_git=has_git, runs_code=True)


@dataclass
class PackageRunConfig:
    budget: CallBudget = field(default_factory=CallBudget)
    workers: int = 2
    timeout_s: float = 60.0
    seed: int = 0


def observe_package(spec: PackageSpec, cache: Path, run: PackageRunConfig) -> tuple[Path, dict[str, Any]]:
    """Raw observations of one package in ``cache/observations/KEY.jsonl`` (skipped when present)."""
    from squeez_ray.io_utils import write_text_atomic

    out = cache / "observations" / f"{spec.key}.jsonl"
    info_path = out.with_suffix(".json")
    if out.exists() and info_path.exists():
        return out, json.loads(info_path.read_text())
    tree = prepare_tree(spec, cache)
    calls = plan_calls(tree, run.budget, run.seed)
    # The generated test file always runs (plan_calls samples test files; it may be missed).
    if (tree.path / GENERATED_TEST).exists() and not any(
            c.tool_type == "test_output" and c.args.get("tests") == [GENERATED_TEST] for c in calls):
        calls.append(PlannedCall(tree, "test_output", {"tests": [GENERATED_TEST]}))
    observations, failures = run_calls(calls, workers=run.workers, timeout_s=run.timeout_s)
    for obs in observations:
        obs["instance_id"] = f"pypi:{spec.key}"
    info = {"package": spec.name, "version": spec.version, "old_version": spec.old_version,
            "has_git": tree.has_git, "calls": len(calls), "observations": len(observations),
            "skipped_calls": dict(failures)}
    write_text_atomic(out, "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in observations))
    write_text_atomic(info_path, json.dumps(info) + "\n")
    shutil.rmtree(tree.path, ignore_errors=True)  # the worktree is rebuilt from the cache when needed
    return out, info


def read_observations(path: Path) -> list[dict[str, Any]]:
    with path.open() as handle:
        return [json.loads(line) for line in handle if line.strip()]
