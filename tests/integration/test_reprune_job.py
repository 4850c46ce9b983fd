"""The re-prune job on a real local Ray over the real stored runs in ../shared/trajectories."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from squeez_ray.infer.registry import BackendOptions
from squeez_ray.trajectories.detect import ADAPTERS
from squeez_ray.trajectories.pipeline import REPORT_FILES, RepruneConfig, run_reprune
from squeez_ray.trajectories.process import STATE_DIR, RepruneSettings
from squeez_ray.trajectories.verify import check_file

REPO = Path(__file__).resolve().parents[2]
RUN_FILES = 22  # stored-run files (the V1 conversation counts its 9 JSON files; SOURCES.md etc. are extra)


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` except the job's own report files and state, by relative path."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.relative_to(root).parts[0] not in REPORT_FILES}


def fingerprint(root: Path) -> dict[str, tuple[str, int]]:
    return {p.relative_to(root).as_posix(): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def reprune(input_dir: Path, output_dir: Path, backend: str, **kwargs) -> dict:
    settings = RepruneSettings(input_dir=str(input_dir), output_dir=str(output_dir))
    return run_reprune(RepruneConfig(settings=settings, backend=backend, options=BackendOptions(), **kwargs),
                       echo=False)


def test_none_backend_writes_every_file_back_byte_identical(ray_local, trajectories_dir, tmp_path):
    before = fingerprint(trajectories_dir)
    summary = reprune(trajectories_dir, tmp_path / "out", "none", workers=2)
    assert tree(tmp_path / "out") == tree(trajectories_dir)
    runs = [p for p in tree(trajectories_dir) if p.endswith((".traj", ".json", ".jsonl"))]
    assert len(runs) == RUN_FILES
    total = summary["total"]
    assert total["files"] == 14 and total["observations"] == 710 and total["pruned"] == 0 and total["failed"] == 0
    assert total["lines_before"] == total["lines_after"]
    assert fingerprint(trajectories_dir) == before  # inputs never touched


def test_bm25_changes_only_observations_and_every_output_parses(ray_local, trajectories_dir, tmp_path):
    out = tmp_path / "out"
    summary = reprune(trajectories_dir, out, "bm25", workers=2, files_per_batch=3)
    manifest = json.loads((out / "manifest.json").read_text())
    report = json.loads((out / "report.json").read_text())
    assert manifest["config"]["backend"] == "bm25" and manifest["inputs"] == [str(trajectories_dir)]
    assert manifest["counts"] == summary["total"] == report["total"] and manifest["git_revision"]
    assert "| swe-agent | 3 |" in (out / "report.md").read_text()
    # Every format with long outputs got pruned, and every observation is accounted for.
    for name, row in summary["by_format"].items():
        assert row["pruned"] + row["passed_through"] + row["failed"] == row["observations"]
        assert row["failed"] == 0
        if name != "openhands-v1":  # its two observations are one line each
            assert row["pruned"] > 0 and row["lines_after"] < row["lines_before"], name
    changed_units = set()
    for unit, (fmt, source) in _units(trajectories_dir).items():
        written = out / unit
        adapter = ADAPTERS[fmt]
        doc = adapter.load(written)  # parses in its own format
        assert len(adapter.iter_observations(doc)) == len(adapter.iter_observations(adapter.load(source)))
        pairs = ([(source, written)] if source.is_file() else
                 [(f, written / f.relative_to(source)) for f in source.rglob("*") if f.is_file()])
        for before, after in pairs:
            if before.read_bytes() != after.read_bytes():
                problems = check_file(fmt, before.read_bytes(), after.read_bytes())
                assert problems == [], (unit, problems[:3])
                changed_units.add(unit)
        if fmt == "swe-agent":  # the trajectory copy and the history copy were pruned together
            data = json.loads(written.read_text())
            for obs in adapter.iter_observations(doc):
                step, j = obs.locator
                if j is not None and obs.skip_reason is None:
                    assert data["history"][j]["content"].startswith(data["trajectory"][step]["observation"])
    markers = [json.loads(p.read_text()) for p in (out / STATE_DIR / "done").rglob("*.json")]
    assert changed_units == {m["unit"] for m in markers if m["pruned"]} and len(changed_units) >= 10
    # A pruned observation keeps its lines verbatim and says where lines were cut.
    pydicom = json.loads((out / "swe-agent/pydicom__pydicom-1458.traj").read_text())
    original = json.loads((trajectories_dir / "swe-agent/pydicom__pydicom-1458.traj").read_text())
    pruned = [(a["observation"], b["observation"]) for a, b in zip(original["trajectory"], pydicom["trajectory"])
              if a["observation"] != b["observation"]]
    assert pruned
    for full, short in pruned:
        kept = [line for line in short.split("\n") if not line.startswith("... [")]
        assert "lines omitted]" in short and all(line in full.split("\n") for line in kept)


def _units(root: Path) -> dict[str, tuple[str, Path]]:
    from squeez_ray.trajectories.detect import detect_format, discover_units

    return {u: (f, root / u) for u in discover_units(root) if (f := detect_format(root / u))}


def test_corrupt_files_are_reported_copied_and_do_not_stop_the_run(ray_local, trajectories_dir, tmp_path):
    runs = tmp_path / "runs"
    (runs / "ok").mkdir(parents=True)
    good = (trajectories_dir / "swe-agent/pydicom__pydicom-1458.traj").read_bytes()
    (runs / "ok/pydicom.traj").write_bytes(good)
    (runs / "truncated.traj").write_bytes(good[: len(good) // 2])
    claude = (trajectories_dir / "claude-code/5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl").read_text("utf-8")
    (runs / "utf16.jsonl").write_bytes(claude.encode("utf-16"))
    lines = claude.split("\n")
    (runs / "bad-line.jsonl").write_text("\n".join([*lines[:5], lines[5][:40], *lines[6:]]), encoding="utf-8")
    # JSON nested deeper than Python's parser recurses (RecursionError, not JSONDecodeError): once a
    # Ray traceback that aborted the whole run with no report.
    deep = "[" * 50_000 + "]" * 50_000
    (runs / "deep.traj").write_text('{"trajectory": ' + deep + ', "history": []}', encoding="utf-8")
    (runs / "deep.jsonl").write_text(lines[0] + "\n" + '{"sessionId": "s", "x": ' + deep + "}\n", encoding="utf-8")
    out = tmp_path / "out"
    summary = reprune(runs, out, "bm25")
    failed = {f["unit"]: f["error"] for f in summary["failed_files"]}
    assert set(failed) == {"truncated.traj", "utf16.jsonl", "bad-line.jsonl", "deep.traj", "deep.jsonl"}
    assert "invalid JSON" in failed["truncated.traj"] and "not UTF-8" in failed["utf16.jsonl"]
    assert "nested too deeply" in failed["deep.traj"] and "nested too deeply" in failed["deep.jsonl"]
    assert "line 6" in failed["bad-line.jsonl"]
    for name in failed:  # copied unchanged
        assert (out / name).read_bytes() == (runs / name).read_bytes()
    assert (out / "ok/pydicom.traj").read_bytes() != good and summary["by_format"]["swe-agent"]["pruned"] > 0
    assert "truncated.traj" in (out / "report.md").read_text()


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_same_result_without_redoing_work(ray_local, trajectories_dir, tmp_path):
    reference = tmp_path / "reference"
    reprune(trajectories_dir, reference, "bm25")
    out = tmp_path / "out"
    command = [sys.executable, str(REPO / "jobs/reprune.py"), "--input", str(trajectories_dir), "--output", str(out),
               "--backend", "bm25", "--files-per-batch", "1", "--workers", "1"]
    # A private embedded Ray in the child (never the test session's), and a pause before each file
    # is written so the kill lands mid-run.
    env = {**os.environ, "RAY_ADDRESS": "local", "SQUEEZ_REPRUNE_DELAY_PER_FILE_S": "1.5"}
    child_log = tmp_path / "killed-run.log"
    with open(child_log, "wb") as log:
        child = subprocess.Popen(command, env=env, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
    done_dir = out / STATE_DIR / "done"
    deadline = time.monotonic() + 240
    try:
        while len(list(done_dir.rglob("*.json"))) < 4:
            assert child.poll() is None, f"the job ended before it could be killed:\n{child_log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "the job made no progress"
            time.sleep(0.2)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    finished = {p.relative_to(done_dir).as_posix()[:-5] for p in done_dir.rglob("*.json")}
    assert 4 <= len(finished) < 16  # killed mid-run
    kept = {u: (out / u).stat().st_mtime_ns for u in finished if (out / u).is_file()}
    rerun = subprocess.run([*command[:-4], "--files-per-batch", "2", "--workers", "1"], check=False,
                           env={**os.environ, "RAY_ADDRESS": "local"}, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"{len(finished)} already done" in rerun.stdout
    assert {u: (out / u).stat().st_mtime_ns for u in kept} == kept  # finished files were not redone
    assert tree(out) == tree(reference)
    assert json.loads((out / "report.json").read_text())["total"] == json.loads(
        (reference / "report.json").read_text())["total"]
    assert not list((out / STATE_DIR).glob("tmp/*"))
