"""The quickstart evaluates only outputs its served model reads whole, so each is one model call.

On CI's loaded 2-core machine a 534-line sample output, cut into chunks, took Gemma 180-300 s: the
call met the 300 s request timeout and its four outputs came back unpruned. The selection counts the
prompt the model is served against the Serve config's own context and answer budget.
"""

from __future__ import annotations

import json

import pytest
import yaml

from squeez_ray.quickstart import QuickstartConfig, QuickstartError, whole_output_examples


def _case(ident: str, lines: int) -> dict:
    output = "\n".join(f"tests/test_mod.py::test_case_{i} FAILED - AssertionError: {i}" for i in range(lines))
    return {"instance_id": ident, "query": "which test failed", "tool_output": output, "gold_spans": [],
            "is_irrelevant": True, "tool_type": "test_output", "source": "unit"}


def _serve_config(tmp_path, max_model_len: int, max_new_tokens: int | None = 64):
    args = {"backend": "vllm", "model": "x", "engine_kwargs": {"max_model_len": max_model_len}}
    if max_new_tokens:
        args["pruner"] = {"max_new_tokens": max_new_tokens}
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump({"applications": [{"name": "squeez", "args": args}]}))
    return str(path)


def _prompt_tokens(model_dir, case) -> int:
    from transformers import AutoTokenizer

    from squeez_ray.model_family import family_of
    from squeez_ray.prompt import DEFAULT_SYSTEM_PROMPT

    prompt = family_of(model_dir).render_prompt(case["query"], case["tool_output"], DEFAULT_SYSTEM_PROMPT)
    return len(AutoTokenizer.from_pretrained(str(model_dir))(prompt, add_special_tokens=False)["input_ids"])


def test_keeps_the_first_outputs_that_fit_the_served_context_whole(tmp_path, tiny_qwen3_dir):
    from squeez_ray.schema.files import read_examples

    cases = [_case("a", 3), _case("long", 300), _case("b", 10), _case("c", 5), _case("d", 4)]
    data = tmp_path / "test.jsonl"
    data.write_text("".join(json.dumps(c) + "\n" for c in cases))
    before = data.read_bytes()
    context = _prompt_tokens(tiny_qwen3_dir, cases[2]) + 64  # "b" fits with its 64 answer tokens exactly
    config = QuickstartConfig(serve_config=_serve_config(tmp_path, context), eval_limit=3)
    out = tmp_path / "eval_data.parquet"
    what = whole_output_examples(config, data, tiny_qwen3_dir, out)
    assert [e["instance_id"] for e in read_examples(out)] == ["a", "b", "c"]  # in order, "long" left out, limit 3
    assert "4 of 5 test outputs fit" in what and "evaluating the first 3" in what
    assert data.read_bytes() == before

    config = QuickstartConfig(serve_config=_serve_config(tmp_path, context - 1), eval_limit=3)
    whole_output_examples(config, data, tiny_qwen3_dir, out)
    assert [e["instance_id"] for e in read_examples(out)] == ["a", "c", "d"]  # one token less: "b" is out


def test_nothing_fitting_or_no_budget_in_the_serve_config_is_a_clear_error(tmp_path, tiny_qwen3_dir):
    data = tmp_path / "test.jsonl"
    data.write_text(json.dumps(_case("long", 300)) + "\n")
    config = QuickstartConfig(serve_config=_serve_config(tmp_path, 256))
    with pytest.raises(QuickstartError, match="no output of .* fits 256 tokens with 64"):
        whole_output_examples(config, data, tiny_qwen3_dir, tmp_path / "o.parquet")
    config = QuickstartConfig(serve_config=_serve_config(tmp_path, 4096, max_new_tokens=None))
    with pytest.raises(QuickstartError, match="pruner.max_new_tokens"):
        whole_output_examples(config, data, tiny_qwen3_dir, tmp_path / "o.parquet")


def test_the_cpu_quickstart_evaluates_whole_outputs():
    from squeez_ray.config import load_config
    from squeez_ray.quickstart import REPO_ROOT

    assert load_config(QuickstartConfig, REPO_ROOT / "jobs/configs/quickstart_cpu.yaml", []).eval_whole_outputs
