"""Pool rows from Python sources: the package observations of ``jobs/build_encoder_data.py``, long
outputs run over the same unpacked packages, and the git history of a real repository.

Everything here runs real tools over real code and stores what they printed; the sampling only
chooses WHICH outputs a labeller sees (a quota per family and package, so no family swamps the set).

    python jobs/collect_pool.py python --cache runs/encoder_data_cache --repo . \\
        --out runs/handlabel/pool/python.jsonl
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Any

from squeez_ray.collect.pool import make_output_id
from squeez_ray.collect.sources.reserved import is_reserved

MAX_LINES = 3000  # longer outputs are left out whole, never cut
# Observations per package and family (the package observations hold ~60 reads and ~50 greps each).
QUOTAS = {"read_file": 4, "grep": 3, "git_log": 1, "git_blame": 2, "git_diff": 2, "ls_find": 1, "lint": 3,
          "type_check": 2, "test_output": 2, "python_traceback": 2, "pip_install": 1, "build_output": 1}
# Collector tool types -> the families of LABELLING.md (named as the public cases name them).
FAMILY_OF = {"lint_output": "lint", "ls": "ls_find", "python": "python_traceback"}
LONG_LINES = 800
MAX_OUTPUT_BYTES = 16 * 1024 * 1024  # a third-party run printing more is dropped (MAX_LINES keeps far less)
ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "NO_COLOR": "1", "TERM": "dumb", "GIT_PAGER": "cat",
       "PAGER": "cat", "HOME": "/tmp"}


def _licence(src: Path) -> str:
    for meta in (src / "PKG-INFO", *src.glob("*.egg-info/PKG-INFO")):
        if meta.exists():
            text = meta.read_text(errors="replace")
            classifiers = re.findall(r"^Classifier: License :: (?:OSI Approved :: )?(.+)$", text, re.M)
            if classifiers:
                return classifiers[0].strip()
            found = re.search(r"^License(?:-Expression)?: (.+)$", text, re.M)
            if found and len(found.group(1)) < 80:
                return found.group(1).strip()
    return "see the package's LICENSE file"


def _row(source: str, family: str, command: str, cwd: str, exit_code: int | None, output: str,
         versions: str, licence: str) -> dict[str, Any]:
    output = output.rstrip("\n")
    return {"output_id": make_output_id(source, command, output), "source": source, "family": family,
            "command": command, "cwd": cwd, "exit_code": exit_code, "tool_output": output, "versions": versions,
            "licence": licence, "collected_at": date.today().isoformat()}


def _usable(output: str) -> bool:
    output = output.rstrip("\n")  # as stored
    return 5 <= output.count("\n") + 1 <= MAX_LINES and bool(output.strip())


def package_rows(cache: Path, seed: int = 0) -> list[dict[str, Any]]:
    """A per-family sample of each package's observations, as pool rows."""
    rows = []
    for path in sorted((cache / "observations").glob("*.jsonl")):
        if not path.with_suffix(".json").exists():
            continue  # the scratch projects of jobs/build_encoder_data.py: generated code, not a real source
        info = json.loads(path.with_suffix(".json").read_text())
        name, version = info["package"], info["version"]
        if is_reserved(name):
            continue
        source = f"pypi:{name}"
        licence = _licence(cache / "src" / f"{name}-{version}")
        by_family: dict[str, list[dict[str, Any]]] = {}
        for obs in (json.loads(line) for line in path.open() if line.strip()):
            family = FAMILY_OF.get(obs["tool_type"], obs["tool_type"])
            if obs.get("error") or not _usable(obs["tool_output"]):
                continue
            if family == "python_traceback" and "Traceback (most recent call last)" not in obs["tool_output"]:
                continue  # a pydoc page, not a traceback
            by_family.setdefault(family, []).append(obs)
        rng = random.Random(f"{seed}:{name}")
        for family, observations in sorted(by_family.items()):
            for obs in rng.sample(observations, min(QUOTAS.get(family, 0), len(observations))):
                rows.append(_row(source, family, obs["command"], f"{name}-{version} (unpacked sdist)",
                                 obs.get("exit_code"), obs["tool_output"], f"{name} {version}", licence))
    return rows


def _run_third_party(argv: list[str], src: Path, timeout: float = 120,
                     env_extra: dict[str, str] | None = None) -> tuple[int | None, str]:
    """A command over an unpacked third-party package (its tests, its imports, reads of its files) runs in
    the collection sandbox: own HOME, scrubbed environment, no network, output cap, the whole process
    group killed at the deadline. (None, "") when it timed out or could not start."""
    from squeez_ray.collect.sandbox import run_sandboxed

    result = run_sandboxed(argv, src, timeout_s=timeout, max_output_bytes=MAX_OUTPUT_BYTES, env_extra=env_extra)
    if result.error or result.truncated:
        return None, ""
    return result.exit_code, result.output


def _run(argv: list[str], cwd: Path, timeout: float = 120) -> tuple[int | None, str]:
    """Our own tools (git over a checkout, pip's resolver against the index): not third-party code."""
    try:
        done = subprocess.run(argv, cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, ""
    return done.returncode, done.stdout.decode("utf-8", "replace")


def long_rows(cache: Path, seed: int = 0) -> list[dict[str, Any]]:
    """Long outputs over the unpacked packages: whole reads of files over 800 lines, wide greps,
    verbose test runs. Agents meet these too, and they are where pruning matters most."""
    rows = []
    python = sys.executable
    for src in sorted((cache / "src").iterdir()):
        info_files = list((cache / "observations").glob(f"{src.name}.json"))
        if not info_files:  # old releases (history only) are not sources of their own
            continue
        info = json.loads(info_files[0].read_text())
        name, version = info["package"], info["version"]
        if is_reserved(name):
            continue
        source, licence, versions = f"pypi:{name}", _licence(src), f"{name} {version}"
        rng = random.Random(f"{seed}:long:{name}")
        big = [p for p in sorted(src.rglob("*.py")) if LONG_LINES < sum(1 for _ in p.open(errors="replace")) <= MAX_LINES]
        commands: list[tuple[str, list[str]]] = [("read_file", ["cat", "-n", "--", str(p.relative_to(src))])
                                                 for p in rng.sample(big, min(2, len(big)))]
        commands.append(("grep", ["grep", "-rn", "--include=*.py", "self\\.", "."]))
        commands.append(("ls_find", ["find", ".", "-not", "-path", "*/__pycache__*"]))
        tests = [p for p in src.rglob("test*.py") if p.is_file()]
        if tests:
            commands.append(("test_output", [python, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--tb=short",
                                             str(rng.choice(tests).relative_to(src))]))
        for family, argv in commands:
            code, output = _run_third_party(argv, src)
            command = " ".join(argv).replace(python, "python")
            if code is not None and _usable(output) and output.count("\n") + 1 > LONG_LINES:
                rows.append(_row(source, family, command, f"{name}-{version} (unpacked sdist)", code, output,
                                 versions, licence))
    return rows


# Resolver conflicts agents meet: real packages pinned against their own declared requirements.
PIP_CONFLICTS = (("arrow==1.3.0", "python-dateutil==2.6.1"), ("jinja2==3.1.4", "markupsafe==1.1.1"),
                 ("isort==5.13.2", "python-dateutil==2.9.0.post0", "arrow==0.10.0", "six==1.10.0"),
                 ("mistune==3.0.2", "tqdm==4.66.4", "tomli==1.0.0", "platformdirs==99.0"))


def _source_root(folder: Path) -> Path:
    """The sdist's own top folder inside its unpack folder (as ``collect.sources.packages.unpack`` returns it)."""
    entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else folder


def extra_rows(cache: Path) -> list[dict[str, Any]]:
    """Families the per-package sample leaves thin: strict type checks, whole test suites, resolver
    failures against the real index, and tracebacks of imports run with warnings as errors."""
    rows = []
    python = sys.executable
    for info_file in sorted((cache / "observations").glob("*.json")):
        info = json.loads(info_file.read_text())
        name, version = info["package"], info["version"]
        src = cache / "src" / f"{name}-{version}"
        if is_reserved(name) or not src.is_dir():
            continue
        src = _source_root(src)
        source, licence, versions = f"pypi:{name}", _licence(src), f"{name} {version}"
        packages = sorted({p.parent.relative_to(src).parts[0] for p in src.glob("*/__init__.py")} |
                          {p.parent.relative_to(src).as_posix() for p in src.glob("src/*/__init__.py")})
        packages = [p for p in packages if not p.startswith(("test", "doc", "example"))][:1]
        commands: list[tuple[str, list[str]]] = []
        if packages:
            commands.append(("type_check", [python, "-m", "mypy", "--strict", "--ignore-missing-imports",
                                            "--no-color-output", "--no-incremental", packages[0]]))
            module = packages[0].split("/")[-1]
            commands.append(("python_traceback", [python, "-W", "error", "-X", "dev", "-c",
                                                  f"import {module}, pkgutil, importlib\n"
                                                  f"for m in pkgutil.walk_packages({module}.__path__, '{module}.'):\n"
                                                  "    importlib.import_module(m.name)"]))
        for tests in ("tests", "test", "testing"):
            if (src / tests).is_dir():
                commands.append(("test_output", [python, "-m", "pytest", "-q", "--tb=short", "-p", "no:cacheprovider",
                                                 "-x", tests]))
                break
        for family, argv in commands:
            env_path = f"{src}:{src / 'src'}"
            code, output = _run_third_party(argv, src, timeout=180,
                                            env_extra={"PYTHONPATH": env_path, "MYPY_CACHE_DIR": os.devnull})
            if code is None:
                continue
            if family == "python_traceback" and "Traceback" not in output:
                continue
            if _usable(output):
                command = " ".join(argv).replace(python, "python").replace("\n", "; ")
                rows.append(_row(source, family, command, f"{name}-{version} (unpacked sdist)", code,
                                 output, versions, licence))
    for pins in PIP_CONFLICTS:
        argv = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-cache-dir", *pins]
        code, output = _run(argv, Path("/tmp"), timeout=300)
        if code is not None and _usable(output):
            rows.append(_row("pypi:resolver-conflicts", "pip_install", " ".join(argv).replace(python, "python"), "/tmp",
                             code, output, "pip (the project's venv)", "the packages' own licences"))
    return rows


def repo_rows(repo: Path, source: str, licence: str, seed: int = 0) -> list[dict[str, Any]]:
    """Real git history: log in its usual forms, show, diff between commits, blame, over ``repo``."""
    code, log = _run(["git", "log", "--format=%H"], repo)
    commits = log.split()
    if code != 0 or len(commits) < 10:
        return []
    rng = random.Random(f"{seed}:{source}")
    _, files = _run(["git", "ls-files", "*.py", "*.md", "*.yaml"], repo)
    tracked = [f for f in files.split("\n") if f]
    commands: list[tuple[str, list[str]]] = [
        ("git_log", ["git", "log", "--oneline", "-n", "60"]),
        ("git_log", ["git", "log", "-n", "25"]),
        ("git_log", ["git", "log", "--stat", "-n", "12"]),
        ("git_log", ["git", "log", "-p", "-n", "3", "--", rng.choice(tracked)]),
        ("git_log", ["git", "log", "--format=%h %ad %s", "--date=short", "--", "docs"]),
    ]
    paths = rng.sample(tracked, min(24, len(tracked)))
    commands += [("git_log", ["git", "log", "-n", "8", "--", p]) for p in paths[:8]]
    commands += [("git_log", ["git", "log", "--format=fuller", "--stat", "-n", "6", "--", p]) for p in paths[8:14]]
    commands += [("git_log", ["git", "log", "--oneline", "--", p]) for p in paths[14:20]]
    commands += [("git_log", ["git", "log", "--oneline", "-S", word]) for word in ("init_ray", "fail open", "zstd",
                                                                                  "Retry-After", "max_steps")]
    commands += [("git_log", ["git", "log", "-i", "--grep", word]) for word in ("encoder", "serve", "resume", "test")]
    commands += [("git_diff", ["git", "show", "--stat", "-p", c]) for c in rng.sample(commits, 8)]
    commands += [("git_diff", ["git", "diff", f"{c}~1", c, "--", "squeez_ray"]) for c in rng.sample(commits[:-1], 4)]
    commands += [("git_blame", ["git", "blame", "--", f]) for f in rng.sample([f for f in tracked if f.endswith(".py")], 8)]
    commands += [("grep", ["git", "grep", "-n", word]) for word in rng.sample(["init_ray", "DataError", "atomic_path",
                                                                             "split_lines", "fail open", "Retry-After"], 4)]
    _, head = _run(["git", "rev-parse", "--short", "HEAD"], repo)
    rows = []
    for family, argv in commands:
        code, output = _run(["git", "--no-pager", *argv[1:]] if argv[0] == "git" else argv, repo)
        if code == 0 and _usable(output):
            rows.append(_row(source, family, " ".join(argv), f"{source} at {head.strip()}", code, output,
                             f"git {head.strip()}", licence))
    return rows


def write_pool(cache: str | Path, out: str | Path, repo: str | Path | None = None, repo_source: str = "repo:squeez-ray",
               repo_licence: str = "the repository's own licence", seed: int = 0) -> int:
    """The pool rows of the packages cached in ``cache`` (and ``repo``'s history), one per output, written
    to ``out`` (JSONL, atomically): jobs/collect_pool.py python. Returns how many."""
    from squeez_ray.io_utils import write_text_atomic

    cache = Path(cache)
    rows = package_rows(cache, seed) + long_rows(cache, seed) + extra_rows(cache)
    if repo:
        rows += repo_rows(Path(repo), repo_source, repo_licence, seed)
    unique = list({r["output_id"]: r for r in rows}.values())
    write_text_atomic(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in unique))
    return len(unique)
