"""Re-prune resume rules without Ray (issue #15, items 1, 2, 6): a changed input is redone, failed
observations are retried, and links, FIFOs and directories named like run files are reported."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from test_traj_process import SWE, FailsOnTracebacks, settings

from squeez_ray.infer.registry import build_pruner
from squeez_ray.trajectories.pipeline import RepruneConfig, pending_units
from squeez_ray.trajectories.process import process_units

MINI = "mini-swe-agent/django__django-15104.v1.15.0.traj.json"


def _copy_runs(trajectories_dir: Path, tmp_path: Path, *units: str) -> Path:
    runs = tmp_path / "runs"
    for unit in units:
        (runs / unit).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(trajectories_dir / unit, runs / unit)
    return runs


def _todo(runs: Path, out: Path) -> list[str]:
    return pending_units(RepruneConfig(settings=settings(runs, out)))[1]


def test_a_run_that_grew_after_it_was_pruned_is_redone_and_only_it(trajectories_dir, tmp_path):
    runs = _copy_runs(trajectories_dir, tmp_path, SWE, MINI)
    out = tmp_path / "out"
    process_units([SWE, MINI], build_pruner("bm25"), settings(runs, out))
    assert _todo(runs, out) == []
    grown = json.loads((runs / MINI).read_text())
    grown["messages"].append({"role": "user", "content": "<output>\n" + "appended line\n" * 40 + "</output>"})
    (runs / MINI).write_text(json.dumps(grown))
    assert _todo(runs, out) == [MINI]
    process_units([MINI], build_pruner("bm25"), settings(runs, out))
    assert _todo(runs, out) == []
    assert "appended line" in (out / MINI).read_text()


def test_failed_observations_are_retried_by_the_next_run(trajectories_dir, tmp_path):
    runs = _copy_runs(trajectories_dir, tmp_path, SWE)
    out = tmp_path / "out"
    [failed] = process_units([SWE], FailsOnTracebacks(), settings(runs, out, min_lines=2))
    assert failed.failed > 0
    assert _todo(runs, out) == [SWE]  # not hidden behind a done record
    [retried] = process_units([SWE], build_pruner("bm25"), settings(runs, out, min_lines=2))
    assert retried.failed == 0 and _todo(runs, out) == []


def test_links_fifos_and_run_named_directories_are_reported_never_followed(tmp_path):
    from squeez_ray.trajectories.tree import scan_tree

    runs = tmp_path / "runs"
    runs.mkdir()
    secret = tmp_path / "outside.traj"
    secret.write_text("{}")
    (runs / "leak.traj").symlink_to(secret)
    (runs / "dangling.jsonl").symlink_to(tmp_path / "missing")
    (runs / "dir-link").symlink_to(tmp_path)
    os.mkfifo(runs / "pipe.jsonl")
    (runs / "named.traj").mkdir()
    (runs / "notes.txt").write_text("hi")
    tree = scan_tree(runs)
    assert tree.units == ["notes.txt"]
    assert sorted(tree.links) == ["dangling.jsonl", "dir-link", "leak.traj"]
    skipped = dict(tree.skipped)
    assert "FIFO" in skipped["pipe.jsonl"] and "directory" in skipped["named.traj"]
    assert pending_units(RepruneConfig(settings=settings(runs, tmp_path / "out")))[0] == ["notes.txt"]


def test_a_link_is_copied_as_the_same_link_and_the_report_names_skipped_paths(tmp_path):
    from squeez_ray.trajectories import report
    from squeez_ray.trajectories.tree import copy_link

    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "leak.traj").symlink_to("/etc/hostname")
    copy_link(tmp_path / "runs" / "leak.traj", tmp_path / "out" / "sub" / "leak.traj")
    copy_link(tmp_path / "runs" / "leak.traj", tmp_path / "out" / "sub" / "leak.traj")  # a rerun replaces it
    assert os.readlink(tmp_path / "out" / "sub" / "leak.traj") == "/etc/hostname"
    summary = report.summarize([], "characters / 4")
    summary |= {"skipped": [{"path": "pipe.jsonl", "why": "not a regular file (FIFO): not copied"}],
                "links_copied": ["leak.traj"]}
    text = report.markdown(summary, {})
    assert "`pipe.jsonl`: not a regular file (FIFO)" in text and "`leak.traj`" in text
