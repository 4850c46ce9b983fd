"""The released Squeez-2B prompt bytes: every path that renders or sends a prompt produces them exactly.

The golden rows (tests/fixtures, a copy of ../shared/compat/released_prompt_golden.jsonl) hold the
prompt, response and training text the released checkpoint was trained on. One renderer
(``squeez_ray.prompt``) must reproduce them; training, the exporter and each engine must use it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from squeez_ray.infer.registry import BackendOptions
from squeez_ray.infer.base import PruneRequest
from squeez_ray.infer.generative import GenerativePruner, resolve_system_prompt
from squeez_ray.prompt import (PROMPT_FORMAT, QUERY_MAX_CHARS, PromptFormatError, check_prompt_format,
                                     parse_target, render_prompt, render_target, render_training_text)
from squeez_ray.spans import split_lines

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "released_prompt_golden.jsonl"
SHARED_CANDIDATES = [p / "shared" / "compat" / "released_prompt_golden.jsonl" for p in Path(__file__).resolve().parents[2:]]
GOLDEN = [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]


def kept_lines(row) -> list[str]:
    """The kept lines the golden response holds (each must be a line of the output, in order)."""
    return parse_target(row["response"]).lines


def test_fixture_is_the_shared_golden_file():
    shared = next((p for p in SHARED_CANDIDATES if p.is_file()), None)
    if shared is None:
        pytest.skip("../shared/compat is not beside this checkout")
    assert FIXTURE.read_bytes() == shared.read_bytes()


@pytest.mark.parametrize("row", GOLDEN, ids=[r["query"][:20] for r in GOLDEN])
def test_renderer_reproduces_every_golden_row(row):
    assert render_prompt(row["query"], row["tool_output"], row["system_prompt"]) == row["prompt"]
    kept = kept_lines(row)
    assert all(line in split_lines(row["tool_output"]) for line in kept)
    assert render_target(kept) == row["response"]
    assert render_training_text(row["query"], row["tool_output"], kept, row["system_prompt"]) == row["training_text"]
    assert row["training_text"] == row["prompt"] + row["response"] + "<|im_end|>"


def test_golden_holds_a_negative_and_no_thinking_block():
    assert any(kept_lines(r) == [] for r in GOLDEN) and any(kept_lines(r) for r in GOLDEN)
    assert all("<think>" not in r["prompt"] for r in GOLDEN)


def test_query_is_cut_at_1000_characters():
    row = GOLDEN[0]
    long_query = "x" * (QUERY_MAX_CHARS - 1) + "YZ" + " tail"
    prompt = render_prompt(long_query, row["tool_output"], row["system_prompt"])
    assert f"<query>\n{'x' * (QUERY_MAX_CHARS - 1)}Y\n</query>\n" in prompt
    assert render_prompt("#" * (QUERY_MAX_CHARS + 5), "o", "S").count("#") == QUERY_MAX_CHARS


def test_parse_target_reads_the_released_responses():
    for row in GOLDEN:
        parsed = parse_target(row["response"])
        assert parsed.format == "xml" and parsed.complete
    assert parse_target(GOLDEN[0]["response"]).lines == [
        "tests/test_io.py::test_write FAILED", "E       AssertionError: expected 3 lines, got 2"]
    assert parse_target(GOLDEN[1]["response"]).lines == []
    # What the model emits before its stop token, and a think block some servers prepend.
    assert parse_target("<think>\n\n</think>\n\n" + GOLDEN[0]["response"] + "<|im_end|>").lines == kept_lines(GOLDEN[0])


def test_training_tokens_are_the_golden_training_text():
    from transformers import AutoTokenizer

    from squeez_ray.train.tiny import save_tiny_tokenizer
    from squeez_ray.train.data import encode_example, training_row
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        save_tiny_tokenizer(Path(folder))
        tokenizer = AutoTokenizer.from_pretrained(folder)
    for row in GOLDEN:
        kept = kept_lines(row)
        lines = split_lines(row["tool_output"])
        spans = [{"start_line": lines.index(k) + 1, "end_line": lines.index(k) + 1} for k in kept]
        example = training_row({"instance_id": "g", "query": row["query"], "tool_output": row["tool_output"],
                                "gold_spans": spans})
        enc = encode_example(tokenizer, example, max_seq_length=4096, system_prompt=row["system_prompt"])
        assert enc.status == "ok"
        prompt_ids = tokenizer(row["prompt"], add_special_tokens=False)["input_ids"]
        assert enc.input_ids[:enc.prompt_len] == prompt_ids
        assert tokenizer.decode(enc.input_ids) == row["training_text"]
        # The chat template (Qwen 3.x style, with its empty think block) is NOT what training renders.
        chat = tokenizer.apply_chat_template(
            [{"role": "system", "content": row["system_prompt"]}, {"role": "user", "content": "x"}],
            tokenize=False, add_generation_prompt=True, enable_thinking=False)
        assert "<think>" in chat


def test_exporter_writes_the_golden_rows():
    from squeez_ray.schema.formats import from_squeez_row, to_squeez_row

    for n, row in enumerate(GOLDEN, 1):
        lines = split_lines(row["tool_output"])
        spans = [{"start_line": lines.index(k) + 1, "end_line": lines.index(k) + 1} for k in kept_lines(row)]
        example = {"instance_id": f"g{n}", "query": row["query"], "tool_output": row["tool_output"], "gold_spans": spans,
                   "tool_type": "pytest", "source": "swe"}
        out = to_squeez_row(example, system_prompt=row["system_prompt"])
        assert (out["prompt"], out["response"]) == (row["prompt"], row["response"])
        back = from_squeez_row({"prompt": row["prompt"], "response": row["response"]}, path="golden", row=n)
        assert (back["query"], back["tool_output"]) == (row["query"], row["tool_output"])


def _pruner_sending(row, engine):
    return GenerativePruner(engine, BackendOptions(system_prompt=row["system_prompt"], max_new_tokens=64))


@pytest.mark.parametrize("row", GOLDEN, ids=[r["query"][:20] for r in GOLDEN])
def test_vllm_engine_sends_the_golden_prompt(row):
    """The offline vLLM engine hands vLLM the golden text, with no special tokens added on top."""
    from squeez_ray.infer.vllm_engine import VllmEngine

    sent = {}

    class FakeLLM:
        def generate(self, prompts, params, **kwargs):
            sent.update(prompts=prompts, kwargs=kwargs)
            return [type("O", (), {"prompt_token_ids": [1], "outputs": [type("C", (), {"text": row["response"],
                                                                                   "token_ids": [1]})()]})()
                    for _ in prompts]

    engine = VllmEngine.__new__(VllmEngine)  # no vLLM start: the transport is what is under test
    engine.llm, engine.tokenizer, engine.max_context_tokens, engine.model_name = FakeLLM(), None, 8192, "m"
    result = _pruner_sending(row, engine).prune_batch([PruneRequest(row["query"], row["tool_output"])])[0]
    assert sent["prompts"] == [row["prompt"]]
    assert sent["kwargs"]["tokenization_kwargs"] == {"add_special_tokens": False}
    assert result.kept_lines == len(kept_lines(row))


def test_transformers_engine_tokenises_the_golden_prompt():
    from squeez_ray.infer.hf_engine import TransformersEngine

    row = GOLDEN[0]
    seen = {}

    class Tok:
        pad_token_id = eos_token_id = 0

        def __call__(self, prompts, **kwargs):
            seen.update(prompts=prompts, kwargs=kwargs)
            raise RuntimeError("stop here")

    engine = TransformersEngine.__new__(TransformersEngine)
    engine.tokenizer, engine.batch_size, engine.max_context_tokens, engine.model_name = None, 4, 8192, "m"
    engine.device = "cpu"
    pruner = _pruner_sending(row, engine)
    jobs = pruner.prepare([PruneRequest(row["query"], row["tool_output"])]).jobs
    engine.tokenizer = Tok()
    with pytest.raises(RuntimeError, match="stop here"):
        engine.generate(jobs)
    assert seen["prompts"] == [row["prompt"]] and seen["kwargs"]["add_special_tokens"] is False


def test_a_checkpoint_of_the_old_layout_is_refused_in_one_line(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"prompt_format": "squeez-xml-v1", "system_prompt": "s"}))
    with pytest.raises(PromptFormatError) as error:
        resolve_system_prompt(None, tmp_path)
    message = str(error.value)
    assert "\n" not in message and "squeez-xml-v1" in message and PROMPT_FORMAT in message
    assert str(tmp_path / "manifest.json") in message
    # An explicit system prompt does not let an old-layout checkpoint through either.
    with pytest.raises(PromptFormatError):
        resolve_system_prompt("my prompt", tmp_path)
    check_prompt_format(None, "released checkpoint")  # no manifest: the released layout, accepted
    check_prompt_format(PROMPT_FORMAT, "x")


def test_merge_refuses_an_adapter_trained_on_the_old_layout(tmp_path):
    from squeez_ray.train.loop import METADATA_FILE
    from squeez_ray.train.merge import merge_adapter

    (tmp_path / METADATA_FILE).write_text(json.dumps({"prompt_format": "squeez-xml-v1", "base_model_path": "x",
                                                      "system_prompt": "s"}))
    with pytest.raises(PromptFormatError, match="squeez-xml-v1"):
        merge_adapter(tmp_path, tmp_path / "merged")
    assert not (tmp_path / "merged").exists()
