"""The encoder recipe trains in-process, without Ray (``--in-process``): the path for a GPU box that
holds torch and transformers but no Ray. The job runs in a subprocess where ``import ray`` fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from squeez_ray.testing.tiny_encoder import one_error_examples

REPO = Path(__file__).resolve().parents[2]


NO_RAY = textwrap.dedent("""
    import sys, runpy
    class NoRay:  # this machine "has no Ray": any import of it fails
        def find_spec(self, name, path=None, target=None):
            if name == "ray" or name.startswith("ray."):
                raise ImportError("no Ray here")
    sys.meta_path.insert(0, NoRay())
    sys.argv = ["jobs/train_encoder.py", *sys.argv[1:]]
    runpy.run_path("jobs/train_encoder.py", run_name="__main__")
""")


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    from squeez_ray.testing.tiny_encoder import build_tiny_encoder

    return build_tiny_encoder(tmp_path_factory.mktemp("tiny-encoder"))


def _run(tmp_path: Path, base: Path, *overrides: str) -> subprocess.CompletedProcess:
    from squeez_ray.schema import write_examples

    write_examples(one_error_examples(12, 0), tmp_path / "train.jsonl")
    write_examples(one_error_examples(6, 1), tmp_path / "dev.jsonl")
    args = ["--config", "jobs/configs/encoder_v2.yaml", "--in-process", f"train_data={tmp_path / 'train.jsonl'}",
            f"dev_data={tmp_path / 'dev.jsonl'}", f"output_dir={tmp_path / 'model'}", f"base_model={base}",
            f"storage_path={tmp_path / 'runs'}", "epochs=2", "max_steps=2", "log_every=1", "window.max_length=128",
            "head_learning_rate=0.05", "export_onnx=false", *overrides]
    return subprocess.run([sys.executable, "-c", NO_RAY, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600, check=False, env={**os.environ, "PYTHONPATH": str(REPO)})


def test_encoder_trains_in_process_without_ray(tiny_base, tmp_path):
    from squeez_ray.infer.encoder.model import load_scorer
    from squeez_ray.infer.encoder.scoring import score_lines

    done = _run(tmp_path, tiny_base, "num_workers=1", "batch_size=4")
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((tmp_path / "model" / "manifest.json").read_text())
    assert manifest["trained_on"] == "in-process"
    assert manifest["final_metrics"]["step"] == 4 and manifest["final_metrics"]["epoch"] == 1  # 2 epochs x 2 steps
    assert np.isfinite(manifest["final_metrics"]["loss"])
    assert manifest["counts"]["train_examples"] == 12 and manifest["counts"]["train_windows"] >= 12
    # one checkpoint per epoch under storage_path/run_name, the last one is what was saved
    assert sorted(p.name for p in (tmp_path / "runs" / "encoder-v2").iterdir()) == [
        "checkpoint_epoch_0", "checkpoint_epoch_1"]
    saved = json.loads((tmp_path / "model" / "squeez_encoder.json").read_text())
    assert saved["threshold"] == manifest["calibration"]["threshold"]

    dev = one_error_examples(6, 1)
    pairs = [(r["query"], r["tool_output"]) for r in dev]
    before_model, tokenizer, _ = load_scorer(tiny_base)
    after_model, _, settings = load_scorer(tmp_path / "model")
    before = np.concatenate(score_lines(before_model, tokenizer, settings.window, pairs, dtype="float32"))
    after = np.concatenate(score_lines(after_model, tokenizer, settings.window, pairs, dtype="float32"))
    assert not np.allclose(before, after)  # four steps moved the scores


def test_in_process_training_refuses_several_workers(tiny_base, tmp_path):
    done = _run(tmp_path, tiny_base, "num_workers=2")
    assert done.returncode == 2
    assert "in-process training is one worker: set num_workers=1" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "model").exists()


def test_local_batches_shuffle_by_seed_and_cover_every_row(tmp_path):
    from squeez_ray.train.session import LocalSession

    rows = [{"input_ids": [i], "labels": [0.0]} for i in range(10)]
    shard = LocalSession(rows, tmp_path).dataset_shard()
    first = [b["input_ids"] for b in shard.iter_batches(batch_size=4, local_shuffle_buffer_size=256, local_shuffle_seed=1)]
    again = [b["input_ids"] for b in shard.iter_batches(batch_size=4, local_shuffle_buffer_size=256, local_shuffle_seed=1)]
    other = [b["input_ids"] for b in shard.iter_batches(batch_size=4, local_shuffle_buffer_size=256, local_shuffle_seed=2)]
    assert [len(b) for b in first] == [4, 4, 2]
    assert first == again and first != other
    assert sorted(x[0] for b in first for x in b) == list(range(10))
    assert [b["input_ids"] for b in shard.iter_batches(batch_size=10)] == [[[i] for i in range(10)]]  # no buffer: in order
