"""Every tool type produces a real observation on a real checkout of a real repository (no Ray):
a toy package with history, a failing test from the instance's test patch, a lint error and a type
error. Also: checkouts come from private shared clones, so the mirror is never written, and a reused
checkout is clean again for the next instance."""

from __future__ import annotations

from pathlib import Path

import pytest

from squeez_ray.schema.instances import read_instances
from squeez_ray.collect.sandbox import UnsafePathError
from squeez_ray.collect.tools import TOOL_TYPES, run_tool
from squeez_ray.collect.toy import build_toy_dataset
from squeez_ray.collect.workspace import RepoCache, WorkspaceError, mirror_path
from squeez_ray.testing.checks import tree_digest


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    paths = build_toy_dataset(tmp_path_factory.mktemp("toy"))
    paths["rows"] = read_instances(paths["instances"])
    return paths


@pytest.fixture(scope="module")
def checkout(toy, tmp_path_factory):
    mirror = mirror_path(toy["mirrors"], "toy/calc")
    before = tree_digest(mirror)
    cache = RepoCache(tmp_path_factory.mktemp("cache"), toy["mirrors"])
    first = toy["rows"][0]
    worktree, note = cache.checkout(first["repo"], first["base_commit"], first["test_patch"])
    assert note is None
    yield cache, worktree, mirror, before
    cache.close()


# What each tool must show on the toy instance 1 (divide by zero): real content, not just "it ran".
EXPECTED = {
    "read_file": ({"path": "calc/ops.py"}, "    10\t    return a / b"),
    "grep": ({"pattern": "divide"}, "./calc/ops.py:8:def divide"),
    "git_log": ({"path": "calc/ops.py"}, "Initial calc package with add and divide"),
    "git_blame": ({"path": "calc/ops.py", "start": 8, "end": 10}, "def divide(a: float, b: float)"),
    "git_diff": ({"base": "HEAD~2"}, "+def parse_number(text: str) -> float:"),
    "ls": ({"path": "calc"}, "ops.py"),
    "python": ({"module": "calc.ops", "attribute": "divide"}, "Divide a by b."),
    "test_output": ({"tests": ["tests/test_ops.py::test_divide_by_zero"]}, "ZeroDivisionError"),
    "pip_install": ({"target": "."}, "Would install calc-0.1.0"),
    "type_check": ({"path": "calc/ops.py"}, "calc/ops.py:16"),
    "lint_output": ({"path": "calc"}, "F401"),
    "build_output": ({}, "calc-0.1.0-py3-none-any.whl"),
    "coverage": ({"tests": ["tests/test_ops.py"]}, "TOTAL"),
    "curl": ({"url": "https://calc.example.invalid/issues/1"}, "curl: (6) Could not resolve host"),
}


def test_expectations_cover_all_14_tool_types():
    assert set(EXPECTED) == set(TOOL_TYPES)


@pytest.mark.parametrize("tool_type", TOOL_TYPES)
def test_tool_gives_a_real_observation(checkout, tool_type, tmp_path):
    _, worktree, _, _ = checkout
    args, needle = EXPECTED[tool_type]
    obs = run_tool(tool_type, args, worktree, timeout_s=120, cache_dir=tmp_path)
    assert obs["error"] is None and obs["exit_code"] is not None and not obs["truncated"], obs
    assert needle in obs["tool_output"], obs["tool_output"][-2000:]
    assert obs["command"] and obs["duration_s"] >= 0


def test_failing_test_fails_for_the_right_reason(checkout):
    _, worktree, _, _ = checkout
    obs = run_tool("test_output", {"tests": ["tests/test_ops.py::test_divide_by_zero"]}, worktree, timeout_s=120)
    assert obs["exit_code"] == 1 and "1 failed" in obs["tool_output"]


def test_files_with_shell_syntax_in_their_names_are_read_as_data(checkout, toy):
    _, worktree, _, _ = checkout
    name = next(p.name for p in (worktree / "docs").iterdir() if p.name.startswith("notes"))
    obs = run_tool("read_file", {"path": f"docs/{name}"}, worktree)
    assert obs["exit_code"] == 0 and "awkward file name" in obs["tool_output"]
    assert not any(p.name.startswith("PWNED") for p in Path(toy["src"]).parent.rglob("*"))


def test_tracked_symlink_out_of_the_tree_is_refused(checkout):
    _, worktree, _, _ = checkout
    assert (worktree / "docs" / "hosts.txt").is_symlink()
    with pytest.raises(UnsafePathError):
        run_tool("read_file", {"path": "docs/hosts.txt"}, worktree)


def test_tools_work_on_a_plain_directory_too(tmp_path):
    # Sample-data and encoder-data builders point executors at any package folder, not a git checkout.
    (tmp_path / "m.py").write_text("import os\n\nVALUE: int = 'x'\n")
    assert "F401" in run_tool("lint_output", {"path": "m.py"}, tmp_path)["tool_output"]
    assert "not a git repository" in run_tool("git_log", {}, tmp_path)["tool_output"]


def test_mirror_is_never_written_and_reused_checkout_is_clean(checkout, toy):
    cache, worktree, mirror, before = checkout
    run_tool("build_output", {}, worktree, timeout_s=120)  # leaves build/ and calc.egg-info in the tree
    (worktree / "calc" / "ops.py").write_text("tampered\n")
    assert (worktree / "build").exists()
    second = toy["rows"][1]
    again, note = cache.checkout(second["repo"], second["base_commit"], second["test_patch"])
    assert again == worktree and note is None
    assert not (worktree / "build").exists() and not (worktree / "calc.egg-info").exists()
    assert "def divide" in (worktree / "calc" / "ops.py").read_text()
    assert (worktree / "tests" / "test_parse.py").exists()  # the second instance's test patch
    assert not (worktree / "tests" / "test_ops.py").read_text().count("test_divide_by_zero")
    assert tree_digest(mirror) == before


def test_missing_mirror_or_commit_is_one_clear_error(toy, tmp_path):
    with pytest.raises(WorkspaceError, match="no mirror for other/repo"):
        mirror_path(toy["mirrors"], "other/repo")
    cache = RepoCache(tmp_path, toy["mirrors"])
    with pytest.raises(WorkspaceError, match="commit 0123456 is not in the mirror"):
        cache.checkout("toy/calc", "0123456")


def test_test_patch_that_does_not_apply_is_reported_not_fatal(toy, tmp_path):
    cache = RepoCache(tmp_path, toy["mirrors"])
    row = toy["rows"][0]
    bad = "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-x\n+y\n"
    worktree, note = cache.checkout(row["repo"], row["base_commit"], bad)
    assert note and "test_patch not applied" in note and (worktree / "calc" / "ops.py").exists()


def test_a_projects_test_run_loads_none_of_squeez_rays_own_pytest_plugins(tmp_path):
    # The sandbox runs the project's tests on squeez-ray's interpreter; its dev plugins are not the project's
    # (and loading them cost ~3 s of CPU per run, 24 runs in the quickstart's sample).
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_alone.py").write_text(
        "import sys\n\n\ndef test_no_foreign_plugins():\n"
        "    assert not {'xdist', 'schemathesis', '_hypothesis_pytestplugin'} & set(sys.modules)\n")
    obs = run_tool("test_output", {"tests": ["tests/test_alone.py"]}, tmp_path, timeout_s=120)
    assert obs["exit_code"] == 0 and "1 passed" in obs["tool_output"], obs["tool_output"]
