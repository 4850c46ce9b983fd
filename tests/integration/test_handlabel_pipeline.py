"""The stored hand-labelled set rebuilds through the real pipeline, and the LoRA recipe trains on it.

- merge: a slice of the stored outputs and label files goes through ``jobs/label.py``'s Ray Data
  pipeline with the file teacher and the dataset build, on a real local Ray, and gives back exactly
  the stored examples for those outputs;
- export + train: the slice as released-Squeez prompt/response rows trains the tiny LoRA config
  through ``jobs/train.py``'s Ray Train path (2 steps, loss finite).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from squeez_ray.config import load_config
from squeez_ray.dataset.datasheet import load_built
from squeez_ray.dataset.hand_merge import merge_labels
from squeez_ray.collect.pool import read_pool, write_pool

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "data" / "handlabel"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def slice_dir(tmp_path_factory):
    """Outputs of three sources and their pass-A label rows and revisions, copied out of the stored set."""
    pool = read_pool(DATA / "outputs.parquet")
    sources = sorted({row["source"] for row in pool.values()})[:3]
    chosen = {i: row for i, row in pool.items() if row["source"] in sources}
    tmp = tmp_path_factory.mktemp("slice")
    write_pool(chosen.values(), tmp / "outputs.parquet")
    rows = [json.loads(line) for f in sorted((DATA / "labels").glob("*.[AW].jsonl")) for line in f.open() if line.strip()]
    (tmp / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["output_id"] in chosen))
    return tmp, set(chosen)


def test_merge_through_the_label_pipeline_reproduces_the_stored_examples(ray_local, slice_dir, tmp_path):
    tmp, chosen = slice_dir
    placed = sorted({row["source"] for row in read_pool(tmp / "outputs.parquet").values()})[-1]
    summary = merge_labels([tmp / "outputs.parquet"], [tmp / "labels.jsonl"], tmp_path / "out", place={placed: "dev"})
    assert summary["written"] and summary["problem_count"] == 0
    rebuilt = {e["instance_id"]: e for e in load_built(tmp_path / "out")}
    # a source placed by hand (--place) lands in that split, whatever its hash order would have given it
    assert {e["split"] for e in rebuilt.values() if e["repo"] == placed} == {"dev"}
    stored = {e["instance_id"]: e for e in load_built(DATA) if e["instance_id"].split("#")[0] in chosen}
    assert rebuilt.keys() == stored.keys() and rebuilt
    for key, example in stored.items():
        for field in ("query", "tool_output", "gold_spans", "is_irrelevant", "tool_type", "repo", "command", "notes"):
            assert rebuilt[key][field] == example[field], (key, field)


def test_exported_prompt_rows_train_the_tiny_lora_recipe(ray_local, slice_dir, tmp_path, monkeypatch):
    from squeez_ray.schema import read_examples, write_examples
    from squeez_ray.train.config import TrainConfig
    from squeez_ray.train.run import run_training

    monkeypatch.chdir(REPO)
    tmp, chosen = slice_dir
    examples = [e for e in load_built(DATA) if e["instance_id"].split("#")[0] in chosen]
    for example in examples:  # train on every row of the slice; dev keeps two for the split filter
        example["split"] = "train"
    examples[-1]["split"] = examples[-2]["split"] = "dev"
    exported = tmp_path / "squeez.jsonl"
    write_examples(examples, exported, format="squeez")
    first = json.loads(exported.read_text().splitlines()[0])
    assert first["prompt"].startswith("<|im_start|>system\n") and "<tool_output>\n" in first["prompt"]
    assert len(read_examples(exported)) == len(examples)  # the export reads back as the same rows
    config = load_config(TrainConfig, REPO / "jobs/configs/tiny_cpu.yaml", {
        "data.train_path": str(exported), "run.storage_path": str(tmp_path / "runs"), "run.name": "handlabel",
        "train.max_steps": 2, "train.logging_steps": 1, "scaling.num_workers": 1, "data.max_seq_length": 512})
    result = run_training(config)
    assert result.metrics["step"] == 2
    history = json.loads((Path(result.checkpoint) / "trainer_state.json").read_text())["log_history"]
    losses = [e["loss"] for e in history if "loss" in e]
    assert losses and all(math.isfinite(x) for x in losses)
