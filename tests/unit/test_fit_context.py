"""jobs/fit_context.py keeps exactly the examples whose served prompt + answer room fit the context."""

from __future__ import annotations

import json

from squeez_ray.testing.jobs import load_job


def _case(ident: str, lines: int) -> dict:
    output = "\n".join(f"tests/test_mod.py::test_case_{i} PASSED" for i in range(lines))
    return {"instance_id": ident, "query": "which test failed", "tool_output": output, "gold_spans": [],
            "is_irrelevant": True, "tool_type": "test_output", "source": "unit"}


def test_keeps_the_fitting_examples_in_order_and_leaves_the_input(tmp_path, tiny_qwen3_dir, capsys):
    from transformers import AutoTokenizer

    from squeez_ray.model_family import family_of
    from squeez_ray.prompt import DEFAULT_SYSTEM_PROMPT
    from squeez_ray.schema.files import read_examples

    cases = [_case("short", 3), _case("long", 400), _case("medium", 20)]
    data = tmp_path / "cases.jsonl"
    data.write_text("".join(json.dumps(c) + "\n" for c in cases))
    before = data.read_bytes()
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_qwen3_dir))
    sizes = {c["instance_id"]: len(tokenizer(family_of(tiny_qwen3_dir).render_prompt(
        c["query"], c["tool_output"], DEFAULT_SYSTEM_PROMPT), add_special_tokens=False)["input_ids"]) for c in cases}
    context = sizes["medium"] + 50  # medium fits with an answer of 50 tokens exactly; long does not
    out = tmp_path / "fit.jsonl"
    code = load_job("fit_context").main(["--data", str(data), "--model", str(tiny_qwen3_dir), "--context-tokens", str(context),
                        "--answer-tokens", "50", "--out", str(out)])
    assert code == 0 and "2 of 3 examples fit" in capsys.readouterr().out
    assert [e["instance_id"] for e in read_examples(out)] == ["short", "medium"]
    assert data.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging file left behind


def test_bad_arguments_are_one_line_errors(tmp_path, tiny_qwen3_dir, capsys):
    data = tmp_path / "cases.jsonl"
    data.write_text(json.dumps(_case("a", 3)) + "\n")
    job = load_job("fit_context")
    assert job.main(["--data", str(data), "--model", str(tiny_qwen3_dir), "--out", str(data)]) == 2
    assert "never modified" in capsys.readouterr().err
    assert job.main(["--data", str(data), "--model", str(tmp_path / "absent"), "--out", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fit_context: ") and "absent" in err and "Traceback" not in err
    assert job.main(["--data", str(data), "--model", str(tiny_qwen3_dir), "--out", str(tmp_path / "o.txt")]) == 2
