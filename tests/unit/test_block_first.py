"""The block-first pruner's pure parts: evidence blocks, the cheap shortlist, the block decision, and
scoring only a subset of lines."""

import numpy as np
import pytest

from squeez_ray.infer.blocks.decoder import BlockDecoder, decide_blocks
from squeez_ray.infer.blocks.shortlist import shortlist
from squeez_ray.infer.encoder.scoring import UNSCORED, score_encoded
from squeez_ray.infer.encoder.windows import WindowSpec
from squeez_ray.infer.blocks.evidence import MAX_BLOCK, block_spans

pytestmark = pytest.mark.unit


def starts(lines):
    spans = block_spans(lines)
    assert spans[0][0] == 0 and spans[-1][1] == len(lines)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), "blocks must tile the output"
    return [s for s, _ in spans]


def test_every_grep_hit_is_its_own_block_and_context_lines_stay_with_their_hit():
    lines = ["src/a.py-10-    # before", "src/a.py:11:def load(path):", "src/a.py-12-    return path", "--",
             "src/a.py:40:    load(x)", "src/b.py:3:from a import load"]
    assert starts(lines) == [0, 4, 5]  # the separator closes the first group


def test_lint_findings_and_compiler_notes():
    lines = ["a.c:3:5: error: expected ';'", "    3 | int x", "      |      ^", "a.c:3:5: note: to match this",
             "b.c:9:1: warning: unused variable 'y'", "b.c:10:1: error: unknown type name 'foo'"]
    assert starts(lines) == [0, 4, 5]  # the note and the caret lines continue the first diagnostic


def test_a_python_file_read_opens_at_definitions_and_keeps_decorators_with_them():
    lines = ["     1\timport os", "     2\t", "     3\t@cache", "     4\tdef load(path):", "     5\t    return path",
             "     6\t", "     7\tclass Config:", "     8\t    def parse(self):", "     9\t        return 1"]
    assert starts(lines) == [0, 2, 6, 7]


def test_pytest_sections_and_diff_hunks_open_blocks():
    pytest_out = ["=== FAILURES ===", "___ test_a ___", "    def test_a():", ">       assert 1 == 2",
                  "E       assert 1 == 2", "tests/t.py:3: AssertionError", "___ test_b ___", "E   KeyError: 'x'"]
    assert starts(pytest_out) == [0, 1, 6]
    diff = ["diff --git a/x b/x", "--- a/x", "+++ b/x", "@@ -1,2 +1,2 @@", "-a", "+b", "@@ -9 +9 @@", "-c", "+d"]
    assert starts(diff) == [0, 3, 6]


def test_no_block_is_longer_than_the_cap():
    lines = [f"log line {i}" for i in range(100)]
    spans = block_spans(lines)
    assert max(e - s for s, e in spans) <= MAX_BLOCK
    assert spans[-1][1] == 100


def test_the_decoder_keeps_the_block_the_query_names_and_drops_its_look_alikes():
    spans = [(i * 4, i * 4 + 4) for i in range(6)]  # six look-alike failures of four lines
    scores = np.full(24, 0.02)
    for k in range(6):
        scores[k * 4 + 2] = 0.3  # each look-alike has one line the model half likes
    scores[12:16] = [0.1, 0.97, 0.9, 0.95]  # the failure the query names
    kept = decide_blocks(scores, spans, 0.25, BlockDecoder(line_ratio=0.5, max_gap=2.0, max_blocks=6))
    assert kept == [14, 15, 16]  # its run from the first to the last strong line, nothing from the others


def test_the_decoder_keeps_a_contiguous_run_inside_a_block():
    scores = np.array([0.01, 0.9, 0.05, 0.8, 0.01, 0.01])
    assert decide_blocks(scores, [(0, 6)], 0.5, BlockDecoder(line_ratio=0.5)) == [2, 3, 4]


def test_the_decoder_keeps_nothing_below_the_threshold_and_at_most_max_blocks():
    scores = np.array([0.1, 0.2, 0.3, 0.9, 0.91, 0.92])
    spans = [(i, i + 1) for i in range(6)]
    assert decide_blocks(scores, spans, 0.95, BlockDecoder()) == []
    assert decide_blocks(scores, spans, 0.5, BlockDecoder(max_blocks=2)) == [5, 6]


def test_decoder_settings_are_checked():
    with pytest.raises(ValueError, match="line_ratio"):
        BlockDecoder(line_ratio=0)
    with pytest.raises(ValueError, match="unknown keys"):
        BlockDecoder.from_json({"line_ratio": 0.5, "gap": 2})


def test_the_shortlist_scores_everything_that_fits_and_otherwise_the_block_the_query_names():
    lines = [f"tests/test_m.py::test_case_{i} PASSED" for i in range(200)]
    lines[150] = "tests/test_m.py::test_parse_config FAILED"
    spans = block_spans(lines)
    tokens = [12] * len(lines)
    assert shortlist("why does test_parse_config fail", lines, spans, tokens, budget=10_000) is None
    chosen = shortlist("why does test_parse_config fail", lines, spans, tokens, budget=200)
    assert 150 in chosen.tolist()
    assert sum(tokens[i] + 1 for i in chosen) <= 200 + 13 * MAX_BLOCK


def test_scoring_a_subset_reads_only_those_lines():
    seen = []

    def forward(ids, mask, types, owner, n_lines):
        seen.append(int(mask.sum()))
        return np.full((ids.shape[0], n_lines), 0.7, dtype=np.float32)

    from squeez_ray.infer.encoder.tokens import LineTokenizer

    tokens = LineTokenizer.__new__(LineTokenizer)
    tokens.cls_id, tokens.sep_id, tokens.pad_id = 1, 2, 0
    line_ids = [[5, 6, 7]] * 10
    whole, part = score_encoded(forward, tokens, WindowSpec(max_length=512), [([9], line_ids, None),
                                                                               ([9], line_ids, np.array([2, 3, 7]))],
                               tokens_per_batch=1)
    assert np.allclose(whole, 0.7)
    assert np.allclose(part[[2, 3, 7]], 0.7) and np.allclose(np.delete(part, [2, 3, 7]), UNSCORED)
    # the subset's windows hold its three lines only, one window per stretch of consecutive lines
    assert sorted(seen) == [3 + 1 * 4, 3 + 2 * 4, 3 + 10 * 4]


def test_fit_job_compares_decoders_on_dev_and_writes_a_model_that_loads(tmp_path):
    import json
    import shutil
    import types

    import pandas as pd

    from squeez_ray.infer.encoder.pruner import DEFAULT_MODEL_DIR
    from squeez_ray.infer.registry import build_pruner
    from squeez_ray.train.encoder import block_decoder_job as job
    from squeez_ray.train.encoder.fusion_scores import claim_for_model, model_id, score_to_cache

    model = tmp_path / "model"
    shutil.copytree(DEFAULT_MODEL_DIR, model)
    rng = np.random.default_rng(0)
    rows, scores = [], {}
    for i in range(60):
        lines = [f"src/mod{j}.py:{j}: value = compute_{j}(x)" for j in range(300)]
        answer = int(rng.integers(0, 300))
        lines[answer] = f"src/config.py:{answer}: retries = parse_retry_limit(env)"
        s = rng.uniform(0.0, 0.1, 300)
        s[answer] = 0.95
        rows.append({"instance_id": f"ex{i}", "query": "where is parse_retry_limit called", "tool_type": "grep",
                     "tool_output": "\n".join(lines), "gold_spans": [{"start_line": answer + 1, "end_line": answer + 1}]})
        scores[f"ex{i}"] = s
    pd.DataFrame(rows).to_parquet(tmp_path / "dev.parquet")
    cache = tmp_path / "cache"
    claim_for_model(cache, model_id(model))
    by_output = {r["tool_output"]: scores[r["instance_id"]] for r in rows}  # the "encoder" of this test
    score_to_cache(lambda pairs: [by_output[output] for _, output in pairs],
                   [(r["instance_id"], r["query"], r["tool_output"]) for r in rows], cache)
    args = types.SimpleNamespace(model=str(model), dev_data=str(tmp_path / "dev.parquet"), max_dev=None,
                                 cache=str(cache), cached_only=True, budgets=[512, 4096], max_recall_loss=0.01,
                                 decoder="auto", report=str(tmp_path / "report.json"), write=True)
    result = job.run(args)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["dev_examples"] == 60 and result["summary"]["decoder_chosen"] in ("blocks", "lines")
    assert {b["shortlist_tokens"] for b in report["shortlist_budgets"]} == {512, 4096}
    settings = json.loads((model / "squeez_encoder.json").read_text())
    assert settings["shortlist_tokens"] in (512, 4096)
    pruner = build_pruner("encoder", model=str(model))
    assert pruner.shortlist_tokens == settings["shortlist_tokens"]
    assert (pruner.block_decoder is not None) == (report["decoder_chosen"] == "blocks")


def test_the_shipped_default_reads_a_shortlist_of_a_long_log_and_keeps_its_failure():
    from squeez_ray.infer.registry import build_pruner

    lines = [f"tests/test_mod{i % 40}.py::test_case_{i} PASSED" for i in range(1500)]
    lines[900:900] = ["", "=" * 30 + " FAILURES " + "=" * 30, "_" * 20 + " test_parse_config " + "_" * 20, "",
                      "    def test_parse_config():", ">       assert parse_config('a.toml').retries == 3",
                      "E       AssertionError: assert 5 == 3", "", "tests/test_config.py:42: AssertionError", ""]
    lines += ["FAILED tests/test_config.py::test_parse_config - AssertionError: assert 5 == 3",
              "======= 1 failed, 1499 passed in 12.34s ======="]
    pruner = build_pruner("encoder")
    assert pruner.shortlist_tokens, "the shipped model reads a shortlist"
    read = []
    forward = pruner._forward

    def counting(ids, mask, *rest):
        read.append(int(mask.sum()))
        return forward(ids, mask, *rest)

    pruner._forward = counting
    result = pruner.prune("which test failed and why", "\n".join(lines))
    assert sum(read) < 2 * pruner.shortlist_tokens  # ~40k tokens when every line is scored
    assert "AssertionError: assert 5 == 3" in result.text
