"""The one HTTP retry policy, and declared dependencies matching what the code imports."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from squeez_ray.http_retry import RETRYABLE_STATUS, RetryPolicy, retry_after_seconds

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("status, retried", [(None, True), (429, True), (503, True), (500, True), (400, False),
                                             (401, False), (404, False), (422, False)])
def test_what_is_retried(status, retried):
    assert RetryPolicy.retryable(status) is retried


def test_backoff_doubles_with_jitter_and_is_capped():
    policy = RetryPolicy(max_retries=5, backoff_base_s=1.0, backoff_max_s=5.0)
    assert policy.attempts == 6
    for attempt, full in enumerate([1.0, 2.0, 4.0]):
        waits = {policy.delay(attempt) for _ in range(50)}
        assert all(full / 2 <= w <= full for w in waits) and len(waits) > 1
    assert policy.delay(10) == 5.0 or policy.delay(10) <= 5.0
    assert RetryPolicy(jitter=False, backoff_base_s=0.25).delay(2) == 1.0


def test_retry_after_wins_but_is_capped():
    policy = RetryPolicy(backoff_max_s=10.0)
    assert policy.delay(0, "3") == 3.0 and policy.delay(0, 60) == 10.0 and policy.delay(0, "0") == 0.0
    assert retry_after_seconds("Wed, 21 Oct 2026 07:28:00 GMT") is None  # a date: our own backoff
    assert retry_after_seconds(None) is None and retry_after_seconds("-4") == 0.0
    assert 429 in RETRYABLE_STATUS and 400 not in RETRYABLE_STATUS


def _declared() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    specs = [*project["dependencies"], *(s for extra in project["optional-dependencies"].values() for s in extra)]
    return {_norm(re.split(r"[\s\[<>=!~;]", spec, maxsplit=1)[0]) for spec in specs}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported_top_level() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in [*(REPO / "squeez_ray").rglob("*.py"), *(REPO / "jobs").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(REPO)))
    return {name: where for name, where in found.items()
            if name not in sys.stdlib_module_names and name not in ("squeez_ray", "__future__")}


def test_every_third_party_import_is_a_declared_dependency():
    owners = packages_distributions()
    declared = _declared()
    undeclared = {}
    for module, where in _imported_top_level().items():
        dists = {_norm(d) for d in owners.get(module, [module])}
        if not dists & declared:
            undeclared[module] = (where, sorted(dists))
    assert undeclared == {}
