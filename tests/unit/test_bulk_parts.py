"""A Ray Data batch that runs twice (its actor died with its node after saving, and Ray retried the
batch elsewhere) must leave one stored part, not two copies of the same rows."""

from __future__ import annotations

import json

from squeez_ray.infer.registry import BackendOptions
from squeez_ray.evaluate.bulk import SystemWorker, read_parts
from squeez_ray.evaluate.local import SystemSpec
from squeez_ray.schema import read_examples


def test_a_retried_batch_rewrites_its_part_instead_of_adding_one(public_cases_path, tmp_path):
    examples = read_examples(public_cases_path)[:2]
    batch = {"example": [json.dumps(e) for e in examples], "example_index": [4, 5]}
    worker = SystemWorker(SystemSpec.parse("bm25"), BackendOptions(), str(tmp_path / "parts"))
    worker(batch)
    first = sorted((tmp_path / "parts").glob("part-*.jsonl"))
    worker(batch)  # the retry
    assert sorted((tmp_path / "parts").glob("part-*.jsonl")) == first and len(first) == 1
    assert sorted(read_parts(tmp_path / "parts")) == [4, 5]
