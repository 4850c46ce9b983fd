"""The next lent GPU's plan (scripts/gpu_loan.py, issue 39 item 6): it fits the loan's limits, and the files it cuts
into per-run folders here come back whole, checksummed, there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import gpu_loan  # noqa: E402 - scripts/ is on the path only now

MiB = gpu_loan.MiB


def test_dry_run_plans_within_the_loan_and_defers_what_cannot_fit():
    done = subprocess.run([sys.executable, str(REPO / "scripts/gpu_loan.py"), "--dry-run"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "run 1: carry out/gpu-loan/run-1" in done.stdout and "deferred vllm" in done.stdout, done.stdout
    result = gpu_loan.plan(gpu_loan.GROUPS, gpu_loan.tree_bytes())
    assert result["fits"][0] == "kernels" and "vllm" not in result["fits"] and "ray-train" not in result["fits"]
    assert result["device_s"] <= gpu_loan.LOAN_S
    for run in result["runs"]:  # each run's carry beside the tree stays under 64 MiB, its checks under 10 minutes
        assert result["tree_bytes"] + run["carry_bytes"] < gpu_loan.CARRY_LIMIT and run["est_s"] < gpu_loan.RUN_LIMIT_S


def test_a_tree_that_fills_the_run_is_refused_in_one_line():
    with pytest.raises(SystemExit, match="leaves no room"):
        gpu_loan.plan(gpu_loan.GROUPS, 63 * MiB)


def _wheels(root: Path) -> dict[str, bytes]:
    files = {"kernels/fla.whl": b"k" * 300_000, "kernels/einops.whl": b"e" * 1000,
             "ray-train/ray.whl": bytes(range(256)) * 10_000}  # 2.4 MiB: three parts at 1 MiB of room
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return files


def test_prepare_cuts_wheels_into_runs_and_the_runs_reassemble_them(tmp_path):
    files = _wheels(tmp_path / "w")
    out, tree = tmp_path / "gpu-loan", 10 * MiB
    limit = tree + gpu_loan.CARRY_MARGIN + 1 * MiB  # 1 MiB of room a run
    manifest = gpu_loan.prepare(tmp_path / "w", out, tree, carry_limit=limit, loan_s=3600)
    runs = manifest["plan"]["runs"]
    assert [(r["group"], r["part"], r["parts"]) for r in runs] == [
        ("kernels", 1, 1), ("ray-train", 1, 3), ("ray-train", 2, 3), ("ray-train", 3, 3)]
    for run in runs:  # each run carries one folder: its part(s) and the manifest, within the room
        folder = out / f"run-{run['run']}"
        assert (folder / "manifest.json").is_file()
        assert sum(p.stat().st_size for p in folder.iterdir() if p.suffix != ".json") <= 1 * MiB
    # There: the warm machine kept runs 2-3; run 4 joins the parts and checks every file's sha256.
    ray_group = next(g for g in manifest["files"] if g["group"] == "ray-train")
    (joined,) = gpu_loan.assemble(out, ray_group)
    assert joined.read_bytes() == files["ray-train/ray.whl"]
    kernels = gpu_loan.assemble(out, next(g for g in manifest["files"] if g["group"] == "kernels"))
    assert sorted(p.name for p in kernels) == ["einops.whl", "fla.whl"]
    # A corrupted part, or one lost to a cold start, stops the run with one line.
    part = out / "run-3" / "ray-train.part02"
    part.write_bytes(b"x" + part.read_bytes()[1:])
    with pytest.raises(SystemExit, match="ray.whl does not match its checksum"):
        gpu_loan.assemble(out, ray_group)
    part.unlink()
    with pytest.raises(SystemExit, match="a cold start loses them"):
        gpu_loan.assemble(out, ray_group)


def test_run_dry_run_lists_checks_without_vllm(tmp_path):
    _wheels(tmp_path / "w")
    out = tmp_path / "gpu-loan"
    gpu_loan.prepare(tmp_path / "w", out, 10 * MiB, carry_limit=10 * MiB + gpu_loan.CARRY_MARGIN + MiB, loan_s=3600)
    done = subprocess.run([sys.executable, str(REPO / "scripts/gpu_loan.py"), "run", "1", "--dry-run", "--dir", str(out),
                           "--out", str(tmp_path / "reports")], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any("pip install --no-index --no-deps" in line and "--target" in line for line in lines), lines
    train = next(line for line in lines if "scripts/gpu_check.py" in line)
    assert "--in-process" in train and "--skip vllm,serve" in train
    assert not (tmp_path / "reports").exists()  # a dry run writes nothing
    manifest = json.loads((out / "run-1" / "manifest.json").read_text())
    assert manifest["plan"]["fits"] == ["kernels", "ray-train"]
