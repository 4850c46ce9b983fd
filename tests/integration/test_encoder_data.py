"""The encoder data builder on real package sources with real tool runs (no network).

Installed packages' folders stand in for PyPI downloads (``local_dir``): the same unpacked-tree
path, git history, generated failing tests, tool runs, rule teacher, QA, splits and writer.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from squeez_ray.collect.sources.packages import GENERATED_TEST, PackageSpec, git_history, import_names, prepare_tree
from squeez_ray.collect.sources.source_tree import CallBudget

# Real tool runs and git, no Ray, Serve or vLLM: beside the cluster streams, not in their queue.
pytestmark = pytest.mark.no_cluster

PACKAGES = ["iniconfig", "mdurl", "cachetools"]  # small pure-Python packages the venv installs anyway


def _flat_checkout(module: str, root: Path) -> Path:
    """site-packages/MODULE copied as a flat-layout project root (what an sdist unpacks to)."""
    spec = importlib.util.find_spec(module)
    assert spec and spec.submodule_search_locations, f"{module} must be installed in the venv"
    project = root / f"{module}-local"
    shutil.copytree(list(spec.submodule_search_locations)[0], project / module,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return project


def _config(tmp_path: Path, packages: list[PackageSpec], **extra):
    from squeez_ray.config import load_config
    from squeez_ray.dataset.encoder_corpus import EncoderDataConfig

    data = {"output_dir": str(tmp_path / "out"), "cache_dir": str(tmp_path / "cache"), "min_packages": 3,
            "scratch_projects": 1, "packages": [p.__dict__ for p in packages],
            "budget": {"read_file": 4, "grep": 4, "ls": 1, "lint_output": 2, "type_check": 0, "test_output": 1,
                       "python": 2, "pip_install": 1, "build_output": 0},
            "build": {"ratios": {"train": 0.34, "dev": 0.33, "test": 0.33}}, **extra}
    return load_config(EncoderDataConfig, None, data)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from squeez_ray.dataset.encoder_corpus import build_encoder_data

    tmp = tmp_path_factory.mktemp("encoder-data")
    specs = [PackageSpec(name, "0.0.local", local_dir=str(_flat_checkout(name, tmp / "src"))) for name in PACKAGES]
    config = _config(tmp, specs)
    return tmp, config, build_encoder_data(config)


def test_builds_splits_from_real_tool_runs_over_each_package(built):
    from squeez_ray.schema import read_examples

    tmp, _, manifest = built
    assert set(manifest["packages"]) == {f"{n}-0.0.local" for n in PACKAGES} and not manifest["packages_failed"]
    rows = {split: read_examples(tmp / "out" / f"{split}.parquet") for split in ("train", "dev", "test")}
    assert sum(map(len, rows.values())) == sum(manifest["counts"][s] for s in rows) > 20
    # A package is one split group: no package's outputs leak from train into dev/test.
    repos = {split: {r["repo"] for r in split_rows} for split, split_rows in rows.items()}
    assert not (repos["train"] & repos["dev"]) and not (repos["train"] & repos["test"])
    every = [r for split_rows in rows.values() for r in split_rows]
    assert {f"pypi/{n}" for n in PACKAGES} <= {r["repo"] for r in every}
    assert {"read_file", "grep"} <= {r["tool_type"] for r in every}
    for row in every:  # labels point inside their outputs; negatives have none
        n = len(row["tool_output"].split("\n"))
        assert all(1 <= s["start_line"] <= s["end_line"] <= n for s in row["gold_spans"])
        assert row["is_irrelevant"] == (not row["gold_spans"])
    # The generated usage tests ran for real and failed inside the package's own code.
    observations = [json.loads(line) for n in PACKAGES
                    for line in (tmp / "cache" / "observations" / f"{n}-0.0.local.jsonl").read_text().splitlines()]
    generated = [o for o in observations if o["tool_type"] == "test_output" and GENERATED_TEST in o["command"]]
    assert len(generated) == len(PACKAGES)
    assert all(o["exit_code"] == 1 and "failed" in o["tool_output"] for o in generated)


def test_rerun_reuses_cached_observations(built):
    from squeez_ray.dataset.encoder_corpus import build_encoder_data

    tmp, config, first = built
    cached = {p: p.stat().st_mtime_ns for p in (tmp / "cache" / "observations").glob("*.jsonl")}
    again = build_encoder_data(config)
    assert {p: p.stat().st_mtime_ns for p in cached} == cached  # no package was run again
    assert again["counts"]["train"] == first["counts"]["train"] and again["counts"]["dev"] == first["counts"]["dev"]


def test_a_broken_package_is_reported_and_too_few_packages_fail(tmp_path):
    from squeez_ray.dataset.encoder_corpus import build_encoder_data

    good = PackageSpec("mdurl", "0.0.local", local_dir=str(_flat_checkout("mdurl", tmp_path / "src")))
    missing = PackageSpec("nowhere", "1.0", local_dir=str(tmp_path / "does-not-exist"))
    with pytest.raises(RuntimeError, match=r"only 1 packages.*nowhere-1.0"):
        build_encoder_data(_config(tmp_path, [good, missing], min_packages=2, scratch_projects=0))


def test_git_history_goes_from_the_old_release_to_the_new_file_by_file(tmp_path):
    old = _flat_checkout("mdurl", tmp_path / "old")
    new = tmp_path / "new"
    shutil.copytree(old, new)
    module = new / "mdurl" / "_url.py"
    module.write_text(module.read_text() + "\n\ndef added_in_new_release():\n    return 1\n")
    (new / "mdurl" / "extra.py").write_text("VALUE = 1\n")
    (new / "mdurl" / "_format.py").unlink()
    git_history(old, new, tmp_path / "repo", "mdurl", "0.1", "0.2")
    log = subprocess.run(["git", "log", "--format=%s"], cwd=tmp_path / "repo", capture_output=True, text=True,
                         check=True).stdout.split("\n")
    assert log[0] == "Release mdurl 0.2" and log[-2] == "Release mdurl 0.1" and len(log) - 1 >= 3
    assert (tmp_path / "repo" / "mdurl" / "extra.py").exists() and not (tmp_path / "repo" / "mdurl" / "_format.py").exists()
    assert subprocess.run(["git", "status", "--porcelain"], cwd=tmp_path / "repo", capture_output=True,
                          text=True).stdout == ""


def test_worktree_gets_generated_tests_for_its_import_name(tmp_path):
    project = _flat_checkout("cachetools", tmp_path / "src")
    assert import_names(project) == ["cachetools"]
    tree = prepare_tree(PackageSpec("cachetools", "0.0.local", local_dir=str(project)), tmp_path / "cache")
    text = (tree.path / GENERATED_TEST).read_text()
    assert "import cachetools" in text and tree.runs_code and not tree.has_git
    assert (project / "cachetools").is_dir() and not (project / GENERATED_TEST).exists()  # source untouched
    CallBudget()  # the budget type the config takes stays importable from sources
