"""The range-answer format (squeez-ranges-v1): rendering bytes, range parsing, training rows, and the
pruner reading the format from a checkpoint manifest (the released verbatim contract stays the default)."""

from __future__ import annotations

import json

import pytest

from squeez_ray.infer.base import PruneRequest
from squeez_ray.infer.fake import FakeEngine
from squeez_ray.infer.generative import Generation, GenerativePruner
from squeez_ray.infer.registry import BackendOptions
from squeez_ray.prompt import DEFAULT_SYSTEM_PROMPT, PROMPT_FORMAT, RANGES_FORMAT, PromptFormatError, check_prompt_format
from squeez_ray.prompt_ranges import (RANGES_SYSTEM_PROMPT, format_ranges, number_lines, parse_ranges,
                                      render_ranges_prompt, render_ranges_target)

LOG = "collected 3 items\ntests/a.py::t1 PASSED\ntests/a.py::t2 FAILED\nE   assert 1 == 2\n1 failed, 1 passed"


def test_rendering_golden_bytes():
    prompt = render_ranges_prompt("which test failed?", LOG.split("\n"))
    assert prompt == (
        f"<|im_start|>system\n{RANGES_SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n<query>\nwhich test failed?\n</query>\n"
        "<tool_output>\n1|collected 3 items\n2|tests/a.py::t1 PASSED\n3|tests/a.py::t2 FAILED\n4|E   assert 1 == 2\n"
        "5|1 failed, 1 passed\n</tool_output><|im_end|>\n<|im_start|>assistant\n")
    assert render_ranges_target([3, 4, 12, 13, 14, 40]) == "<relevant_lines>\n3-4, 12-14, 40\n</relevant_lines>"
    assert render_ranges_target([]) == "<relevant_lines>\n</relevant_lines>"  # a negative: as the verbatim contract
    assert number_lines(["a", "", "b"], first_line=41) == "41|a\n42|\n43|b"
    assert format_ranges([5, 3, 4, 4, 9]) == "3-5, 9"


def test_both_formats_are_accepted_and_others_refused():
    check_prompt_format(PROMPT_FORMAT, "x")
    check_prompt_format(RANGES_FORMAT, "x")
    with pytest.raises(PromptFormatError, match="'other-v1'"):
        check_prompt_format("other-v1", "x")


@pytest.mark.parametrize("reply, lines, counts", [
    ("<relevant_lines>\n12-18, 40\n</relevant_lines>", [*range(12, 19), 40], (2, 0, 0, 0)),
    ("<relevant_lines>\n18-12\n</relevant_lines>", list(range(12, 19)), (1, 0, 0, 1)),  # reversed: read low-high
    ("<relevant_lines>\n3-6, 5-8, 7\n</relevant_lines>", list(range(3, 9)), (3, 0, 0, 0)),  # overlapping: merged
    ("<relevant_lines>\n45-60, 99, 0\n</relevant_lines>", list(range(45, 51)), (3, 0, 3, 0)),  # clipped, dropped, dropped
    ("<relevant_lines>\nline 4, 7-, 2-3x, 9\n</relevant_lines>", [4, 9], (5, 3, 0, 0)),  # malformed items dropped
    ("<relevant_lines>\n4 - 6;  9\n10–11\n</relevant_lines>", [4, 5, 6, 9, 10, 11], (3, 0, 0, 0)),
    ("<relevant_lines>\n</relevant_lines>", [], (0, 0, 0, 0)),
    ("<think>12-14</think><relevant_lines>\n2\n</relevant_lines>", [2], (1, 0, 0, 0)),
])
def test_parse_ranges(reply, lines, counts):
    answer = parse_ranges(reply, 1, 50)
    assert answer.line_numbers == lines
    assert (answer.items, answer.malformed, answer.out_of_range, answer.reversed) == counts
    assert answer.tagged and answer.complete


def test_parse_ranges_cut_and_untagged_replies():
    cut = parse_ranges("<relevant_lines>\n3-5, 12-1", 1, 50)  # cut at the token limit mid-item
    assert cut.line_numbers == [3, 4, 5] and not cut.complete and cut.tagged
    cut_after_separator = parse_ranges("<relevant_lines>\n3-5, ", 1, 50)
    assert cut_after_separator.line_numbers == [3, 4, 5]
    bare = parse_ranges("7-8", 1, 50)  # mapped all the same, counted as unparsed by the pruner
    assert bare.line_numbers == [7, 8] and not bare.tagged
    assert parse_ranges("<relevant_lines>\n1-999999999\n</relevant_lines>", 10, 12).line_numbers == [10, 11, 12]


def test_training_row_and_numbered_encoding_keep_the_output_numbers(tiny_qwen3_dir):
    from squeez_ray.train.data import encode_example, training_row
    from squeez_ray.train.model import load_tokenizer

    lines = [f"line {i}" for i in range(1, 41)]
    row = {"instance_id": "r", "query": "q", "tool_output": "\n".join(lines), "gold_spans": [[20, 22], [24, 24]]}
    ranged = training_row(row, RANGES_FORMAT)
    assert ranged["target"] == "<relevant_lines>\n20-22, 24\n</relevant_lines>"
    assert training_row(row)["target"].startswith("<relevant_lines>\nline 20\n")  # the default stays verbatim
    tokenizer = load_tokenizer(str(tiny_qwen3_dir))
    full = encode_example(tokenizer, ranged, max_seq_length=4096, system_prompt=RANGES_SYSTEM_PROMPT, numbered=True)
    text = tokenizer.decode(full.input_ids[:full.prompt_len])
    assert "\n1|line 1\n" in text and "\n40|line 40\n</tool_output>" in text
    # Truncated to a window around the gold lines: the numbers stay those of the whole output.
    short = encode_example(tokenizer, ranged, max_seq_length=full.prompt_len - 60, overlong="truncate",
                           system_prompt=RANGES_SYSTEM_PROMPT, numbered=True)
    assert short.status == "truncated"
    window = tokenizer.decode(short.input_ids[:short.prompt_len])
    assert "\n20|line 20\n" in window and "\n24|line 24\n" in window and "\n40|line 40" not in window


def _ranges_model_dir(tmp_path, system_prompt=None):
    manifest = {"prompt_format": RANGES_FORMAT}
    if system_prompt:
        manifest["system_prompt"] = system_prompt
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return tmp_path


class ScriptedEngine(FakeEngine):
    """Answers each job with the reply the test scripts for the job's first line (ranges of that chunk)."""

    def __init__(self, replies):
        super().__init__()
        self.replies, self.seen = replies, []

    def generate(self, jobs):
        self.seen.extend(jobs)
        return [Generation(self.replies(job), 10, 3) for job in jobs]


def test_pruner_reads_the_format_from_the_manifest_and_maps_numbers_back(tmp_path):
    engine = ScriptedEngine(lambda job: "<relevant_lines>\n3-4, 9\n</relevant_lines>")
    pruner = GenerativePruner(engine, BackendOptions(max_context_tokens=4096), model_dir=_ranges_model_dir(tmp_path))
    assert pruner.prompt_format == RANGES_FORMAT and pruner.system_prompt == RANGES_SYSTEM_PROMPT
    result = pruner.prune("which test failed?", LOG)
    assert engine.seen[0].prompt == render_ranges_prompt("which test failed?", LOG.split("\n"))
    # 9 is beyond the 5 lines shown: dropped and counted; 3-4 come back verbatim.
    assert result.spans == [[3, 4]] and result.text == "tests/a.py::t2 FAILED\nE   assert 1 == 2"
    assert (result.unmatched_lines, result.answer_lines, result.unparsed_answers, result.output_tokens) == (1, 2, 0, 3)
    # The released checkpoint (no manifest) keeps the verbatim contract.
    plain = GenerativePruner(FakeEngine(), BackendOptions(max_context_tokens=4096), model_dir=tmp_path / "none")
    assert plain.prompt_format == PROMPT_FORMAT and plain.system_prompt == DEFAULT_SYSTEM_PROMPT


def test_a_chunked_output_is_numbered_as_the_whole_output(tmp_path):
    lines = [f"step {i:04d} ok, value={i * 7}" for i in range(1, 301)]
    engine = ScriptedEngine(lambda job: f"<relevant_lines>\n{job.first_line + 1}-{job.first_line + 2}\n</relevant_lines>")
    pruner = GenerativePruner(engine, BackendOptions(max_context_tokens=1024, max_new_tokens=128, chunk_overlap_lines=0),
                              model_dir=_ranges_model_dir(tmp_path, "custom prompt"))
    result = pruner.prune("q", "\n".join(lines))
    assert len(engine.seen) > 1 and pruner.system_prompt == "custom prompt"
    for job in engine.seen:
        assert f"\n{job.first_line}|{lines[job.first_line - 1]}\n" in job.prompt
        assert job.first_line + len(job.lines) - 1 <= 300
    expected = sorted(n for job in engine.seen for n in (job.first_line + 1, job.first_line + 2))
    assert [n for a, b in result.spans for n in range(a, b + 1)] == expected


def test_cut_and_untagged_range_answers_are_counted_unparsed(tmp_path):
    replies = iter(["<relevant_lines>\n2-3, 4", "2-3"])
    engine = ScriptedEngine(lambda job: next(replies))
    pruner = GenerativePruner(engine, BackendOptions(max_context_tokens=4096), model_dir=_ranges_model_dir(tmp_path))
    cut, bare = pruner.prune_batch([PruneRequest("q", LOG), PruneRequest("q", LOG)])
    assert cut.spans == [[2, 3]] and cut.unparsed_answers == 1 and "cut at the token limit" in cut.reason
    assert bare.spans == [[2, 3]] and bare.unparsed_answers == 1
