"""A small but real collection input: a git repository with history, its bare mirror, and a
SWE-bench-format instances file whose patches and tests really apply.

Used by the collection tests, the benchmark and the local demo in docs/DATA.md
(``python jobs/toy_data.py OUT_DIR``). The issue texts carry hostile strings on purpose
(shell metacharacters, ``../`` paths, an unreachable URL) so every run exercises the sandbox.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

REPO = "toy/calc"
HOSTILE = "; touch PWNED_SEMI", "$(touch PWNED_SUBST)", "`touch PWNED_TICK`", "../../../etc/passwd"

_FILES_V1 = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
                      '[project]\nname = "calc"\nversion = "0.1.0"\n\n[tool.setuptools]\npackages = ["calc"]\n',
    "README.md": "# calc\n\nTiny arithmetic helpers.\n",
    "calc/__init__.py": '"""Tiny arithmetic helpers."""\nfrom calc.ops import add, divide, mean\n\n'
                        '__all__ = ["add", "divide", "mean"]\n',
    "calc/ops.py": '"""Arithmetic operations."""\n\n\ndef add(a: float, b: float) -> float:\n    return a + b\n\n\n'
                   'def divide(a: float, b: float) -> float:\n    """Divide a by b."""\n    return a / b\n\n\n'
                   'def mean(values: list[float]) -> float:\n    total = 0\n    for v in values:\n'
                   '        total = add(total, v)\n    return divide(total, len(values))\n',
    "tests/test_ops.py": "from calc.ops import add, divide\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
                         "def test_divide():\n    assert divide(6, 3) == 2\n",
}
_PARSE = ('"""Parsing numbers from user text."""\nimport os\n\n\ndef parse_number(text: str) -> float:\n'
          '    return float(text)\n\n\ndef parse_list(text: str) -> list[float]:\n'
          '    return [parse_number(part) for part in text.split(",")]\n')
# A real file whose name is full of shell syntax: tools must pass it as one argv element.
_ODD_NAME = "docs/notes $(touch PWNED_NAME) `id`; x.txt"
_ESCAPING_LINK = "docs/hosts.txt"


def _git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "Toy Dev", "GIT_AUTHOR_EMAIL": "dev@example.invalid", "GIT_COMMITTER_NAME": "Toy Dev",
           "GIT_COMMITTER_EMAIL": "dev@example.invalid", "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z", "PATH": "/usr/bin:/bin", "HOME": str(cwd),
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _commit(root: Path, message: str) -> str:
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", message)
    return _git(root, "rev-parse", "HEAD").strip()


def build_toy_dataset(out: str | Path, *, extra_instances: int = 0) -> dict[str, Path]:
    """Create ``out/src`` (working repo), ``out/mirrors/toy__calc.git`` and ``out/instances.jsonl``.

    Two instances with real fixes; ``extra_instances`` adds copies under new ids (same repository and
    commits) for throughput benchmarks. Returns the paths.
    """
    out = Path(out)
    src = out / "src"
    src.mkdir(parents=True)
    _git(src, "init", "-q", "-b", "main")
    _write(src, _FILES_V1)
    _commit(src, "Initial calc package with add and divide")
    _write(src, {"calc/parse.py": _PARSE, _ODD_NAME: "Notes with an awkward file name.\n"})
    # A tracked symlink out of the tree: reading it through a tool must be refused.
    (src / _ESCAPING_LINK).symlink_to("/etc/passwd")
    _commit(src, "Add number parsing")
    _write(src, {"README.md": _FILES_V1["README.md"] + "\nUse `calc.mean` for averages.\n"})
    base = _commit(src, "Document mean")

    instances = []
    fixes = [
        ("calc/ops.py", _FILES_V1["calc/ops.py"].replace(
            '    """Divide a by b."""\n    return a / b',
            '    """Divide a by b; dividing by zero raises ValueError."""\n    if b == 0:\n'
            '        raise ValueError("division by zero")\n    return a / b'),
         "tests/test_ops.py", "\n\ndef test_divide_by_zero():\n    import pytest\n\n"
         "    with pytest.raises(ValueError):\n        divide(1, 0)\n",
         "test_divide_by_zero",
         "`divide` raises ZeroDivisionError instead of ValueError\n\nCalling `calc.ops.divide(1, 0)` in calc/ops.py "
         "leaks a ZeroDivisionError; `mean([])` fails the same way. See https://calc.example.invalid/issues/1 "
         f"and the log at {HOSTILE[3]}. Reproduce with `{HOSTILE[0]}` or {HOSTILE[1]} or {HOSTILE[2]}."),
        ("calc/parse.py", _PARSE.replace("return float(text)", "return float(text.strip().replace('_', ''))"),
         "tests/test_parse.py", "from calc.parse import parse_number\n\n\ndef test_parse_underscores():\n"
         "    assert parse_number(' 1_000 ') == 1000\n",
         "test_parse_underscores",
         "parse_number rejects numbers with underscores\n\n`parse_number(' 1_000 ')` raises ValueError. "
         "The helper `parse_list` in calc/parse.py inherits the bug; also check ../calc/parse.py, docs/hosts.txt and "
         f"{HOSTILE[1]}."),
    ]
    for number, (path, fixed, test_path, test_add, test_name, problem) in enumerate(fixes, start=1):
        _git(src, "checkout", "-q", "-b", f"fix-{number}", base)
        _write(src, {path: fixed})
        fix = _commit(src, f"Fix {number}")
        patch = _git(src, "diff", base, fix)
        old_test = (src / test_path).read_text() if (src / test_path).exists() else ""
        _write(src, {test_path: old_test + test_add})
        test_commit = _commit(src, f"Test {number}")
        test_patch = _git(src, "diff", fix, test_commit)
        _git(src, "checkout", "-q", "main")
        instances.append({"instance_id": f"toy__calc-{number}", "repo": REPO, "base_commit": base,
                          "problem_statement": problem, "patch": patch, "test_patch": test_patch,
                          "FAIL_TO_PASS": json.dumps([f"{test_path}::{test_name}"]), "PASS_TO_PASS": "[]",
                          "version": "0.1", "created_at": "2024-01-01T00:00:00Z"})
    for extra in range(extra_instances):
        copy = dict(instances[extra % len(instances)])
        copy["instance_id"] = f"toy__calc-extra-{extra}"
        instances.append(copy)

    mirrors = out / "mirrors"
    mirrors.mkdir()
    subprocess.run(["git", "clone", "-q", "--mirror", str(src), str(mirrors / "toy__calc.git")], check=True,
                   capture_output=True)
    instances_path = out / "instances.jsonl"
    instances_path.write_text("".join(json.dumps(row) + "\n" for row in instances))
    return {"src": src, "mirrors": mirrors, "instances": instances_path}
