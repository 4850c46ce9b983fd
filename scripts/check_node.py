"""Is this node ready for the cluster's jobs? One line per missing program or package, exit 1 if any.

    ~/venv/bin/python scripts/check_node.py --role worker    # cluster.yaml: last of the worker set-up
    ~/venv/bin/python scripts/check_node.py --role head      # cluster.yaml: last of the head set-up

Run it with the Python the jobs run (the cluster's ~/venv): collection runs its tools with
``sys.executable`` (docs/DATA.md, "Executors"), so pytest, coverage, ruff and mypy must import there, and
git, a C compiler (``build_output`` builds a wheel), curl, unshare and prlimit (the sandbox) must be on PATH.
The head also needs boto3: Ray's AWS node provider imports it to start workers. Checks presence only
(``shutil.which``, ``importlib.util.find_spec``): nothing is imported, so it takes well under a second.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys

# program -> what needs it (squeez_ray/collect/tools.py and sandbox.py run these by name)
PROGRAMS = {
    "git": "collection: checkouts, git_log / git_blame / git_diff",
    "cat": "collection: read_file", "grep": "collection: grep", "ls": "collection: ls", "sh": "collection: coverage",
    "curl": "collection: curl",
    "cc": "collection: build_output (pip wheel of C extensions)", "c++": "collection: build_output",
    "make": "collection: build_output",
    "unshare": "collection sandbox: no network (require_network_isolation)",
    "prlimit": "collection sandbox: file-size cap",
}
# module -> what needs it (imported by the jobs' Python, or run as `python -m MODULE` by collection)
MODULES = {
    "pytest": "collection: test_output, coverage", "coverage": "collection: coverage",
    "ruff": "collection: lint_output", "mypy": "collection: type_check", "pip": "collection: pip_install, build_output",
    "squeez_ray": "every job", "ray": "every job", "torch": "training", "transformers": "training",
    "peft": "training", "vllm": "serving, labelling with vLLM",
}
HEAD_MODULES = {"boto3": "Ray's AWS node provider: the autoscaler cannot start a worker without it"}


def problems(role: str) -> list[str]:
    modules = {**MODULES, **(HEAD_MODULES if role == "head" else {})}
    found = [f"program {name} not on PATH (needed by {why})" for name, why in PROGRAMS.items() if shutil.which(name) is None]
    for name, why in modules.items():
        try:
            present = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            present = False
        if not present:
            found.append(f"package {name} not importable by {sys.executable} (needed by {why})")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=("head", "worker"), default="worker")
    args = parser.parse_args(argv)
    found = problems(args.role)
    for line in found:
        print(f"check_node ({args.role}): {line}", file=sys.stderr)
    if not found:
        print(f"check_node ({args.role}): {len(PROGRAMS)} programs and "
              f"{len(MODULES) + (len(HEAD_MODULES) if args.role == 'head' else 0)} packages present")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
