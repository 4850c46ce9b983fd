"""The transformers backend with the tiny random Qwen3 (512-token context): verbatim results, chunking."""

from __future__ import annotations

import pytest

from squeez_ray.infer.registry import build_pruner
from squeez_ray.infer.base import PruneRequest
from squeez_ray.testing.checks import assert_verbatim_result, long_output, sample_requests
from squeez_ray.train.tiny import build_tiny_qwen3

pytestmark = pytest.mark.no_cluster  # starts no Ray, Serve or vLLM: runs beside the cluster tests


@pytest.fixture(scope="module")
def hf_pruner(tmp_path_factory):
    # The context comes from the checkpoint's own config (max_position_embeddings) here.
    model_dir = build_tiny_qwen3(tmp_path_factory.mktemp("tiny-512"), max_position_embeddings=512)
    pruner = build_pruner("transformers", model=str(model_dir), batch_size=3, device="cpu")
    yield pruner
    pruner.close()


def test_batched_left_padded_generation_gives_verbatim_results(hf_pruner):
    requests = sample_requests()
    prepared = hf_pruner.prepare(requests)
    generations = hf_pruner.engine.generate(prepared.jobs)
    for job, generation in zip(prepared.jobs, generations):
        assert 0 < generation.output_tokens <= job.max_new_tokens
    results = hf_pruner.assemble(prepared, generations)
    for request, result in zip(requests, results):
        assert_verbatim_result(result, request.tool_output)
        assert result.pruned and result.model.startswith("tiny-512")
    # Left padding must not change a row's answer: the same prompt alone gives the same greedy text.
    alone = hf_pruner.engine.generate(prepared.jobs[:1])[0]
    assert alone.text == generations[0].text


def test_long_output_is_chunked_from_the_checkpoint_context(hf_pruner):
    assert hf_pruner.context_tokens == 512
    output = long_output(150)
    prepared = hf_pruner.prepare([PruneRequest("which batch was slow?", output)])
    assert len(prepared.jobs) >= 3
    result = hf_pruner.prune("which batch was slow?", output, fail_open=False)
    assert_verbatim_result(result, output)
    assert result.reason.startswith(f"chunked into {len(prepared.jobs)}")
