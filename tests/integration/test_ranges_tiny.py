"""The range format end to end on a tiny model: train in squeez-ranges-v1 (in-process, the loop Ray
Train workers run), merge, and serve the merged checkpoint through the transformers backend, which
reads the format from the manifest and sends exactly the numbered prompt training put before the
ranges answer. A random tiny model does not learn to answer in a few steps (its answer loss
plateaus near 7 even at 30 steps), so what it says is only checked to come back as input lines; the
parsing of answers is tests/unit/test_prompt_ranges.py's."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from squeez_ray.config import load_config
from squeez_ray.prompt import RANGES_FORMAT
from squeez_ray.prompt_ranges import RANGES_SYSTEM_PROMPT
from squeez_ray.train.config import TrainConfig

pytestmark = pytest.mark.no_cluster  # starts no Ray, Serve or vLLM

REPO = Path(__file__).resolve().parents[2]
LOG = ("collected 4 items\ntests/test_a.py::test_one PASSED\ntests/test_a.py::test_two FAILED\n"
       "E   AssertionError: assert 1 == 2\ntests/test_a.py::test_three PASSED\n1 failed, 2 passed in 0.12s")
QUERY = "which test failed and why"


def test_train_merge_and_serve_in_the_range_format(tiny_qwen3_dir, tmp_path, monkeypatch):
    from squeez_ray.infer.base import PruneRequest
    from squeez_ray.infer.registry import BackendOptions, build_pruner
    from squeez_ray.train.data import TokenizeBatch, training_row
    from squeez_ray.train.in_process import train_in_process
    from squeez_ray.train.merge import merge_adapter

    rows = [{"instance_id": "r0", "query": QUERY, "tool_output": LOG, "split": "train",
             "gold_spans": [{"start_line": 3, "end_line": 4}]}]
    config = load_config(TrainConfig, REPO / "jobs" / "configs" / "tiny_cpu.yaml", [
        f"model.base={tiny_qwen3_dir}", f"data.prompt_format={RANGES_FORMAT}", "data.repeat=2",
        "train.max_steps=4", "train.learning_rate=0.01", "train.warmup_ratio=0", "train.lr_scheduler=constant",
        "train.save_steps=4", "train.logging_steps=1", "train.per_device_batch_size=2", "scaling.num_workers=1",
        f"run.storage_path={tmp_path}", "run.name=ranges"])
    scratch = tmp_path / "scratch"  # the system temp folder for this run: the loop must leave nothing in it
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    outcome = train_in_process(config, tmp_path / "ranges", rows=rows)
    assert list(scratch.iterdir()) == []
    checkpoint = Path(outcome["checkpoints"][-1])
    meta = json.loads((checkpoint / "squeez_train.json").read_text())
    assert meta["prompt_format"] == RANGES_FORMAT and meta["system_prompt"] == RANGES_SYSTEM_PROMPT
    losses = [r["loss"] for r in outcome["reports"] if "loss" in r]
    assert losses[-1] < losses[0], losses

    manifest = merge_adapter(checkpoint, tmp_path / "merged")
    assert manifest["prompt_format"] == RANGES_FORMAT  # what serving, squeez eval and re-prune read
    pruner = build_pruner("transformers", BackendOptions(model=str(tmp_path / "merged"), max_new_tokens=48,
                                                         dtype="float32"))
    try:
        assert pruner.prompt_format == RANGES_FORMAT and pruner.system_prompt == RANGES_SYSTEM_PROMPT
        (job,) = pruner.prepare([PruneRequest(QUERY, LOG)]).jobs
        # The served prompt tokenises to the very ids training put before the ranges answer.
        item = training_row(rows[0], RANGES_FORMAT)
        assert item["target"] == "<relevant_lines>\n3-4\n</relevant_lines>"
        tokenized = TokenizeBatch(str(tiny_qwen3_dir), 1024, "drop", RANGES_SYSTEM_PROMPT, RANGES_FORMAT)(
            {key: [item[key]] for key in item})
        trained_prompt = [int(t) for t in tokenized["input_ids"][0][:tokenized["prompt_len"][0]]]
        tokenizer = pruner.engine.tokenizer
        assert tokenizer(job.prompt, add_special_tokens=False)["input_ids"] == trained_prompt
        assert "\n3|tests/test_a.py::test_two FAILED\n" in job.prompt
        result = pruner.prune(QUERY, LOG)
    finally:
        pruner.close()
    source = LOG.split("\n")
    assert all(line in source for line in result.text.split("\n") if result.text), result
    assert result.answers == 1 and result.output_tokens <= 48
