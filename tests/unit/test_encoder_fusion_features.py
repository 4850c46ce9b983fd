"""The fusion's features: the block segmenter, identifier-aware terms, exact symbol hits, block scores.
Each test pins one feature, so a broken feature fails here rather than as a small drop in dev F1."""

from __future__ import annotations

import numpy as np
import pytest

from squeez_ray.infer.encoder.blocks import block_ids
from squeez_ray.infer.encoder.fusion_features import (
    FEATURES,
    line_features,
    subwords,
    symbols,
    terms,
)


def col(features: np.ndarray, name: str) -> np.ndarray:
    return features[:, FEATURES.index(name)]


def pytest_log(names: list[str]) -> list[str]:
    lines = ["============ FAILURES ============"]
    for name in names:
        lines += [f"____________ {name} ____________", "    def check():", ">       assert parse(x) == 2",
                  "E       assert 1 == 2", ""]
    return lines


def test_pytest_failure_sections_are_blocks():
    ids = block_ids(pytest_log(["test_a", "test_b"]))
    assert ids.tolist() == [0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2]


@pytest.mark.parametrize("lines, expected", [
    (["diff --git a/x b/x", "--- a/x", "+++ b/x", "@@ -1 +1 @@", "-a", "+b", "@@ -9 +9 @@", "-c"],
     [0, 0, 0, 1, 1, 1, 2, 2]),
    (["commit 0123abcd", "Author: a", "", "    fix", "commit 4567ef01", "Author: b"], [0, 0, 0, 0, 1, 1]),
    (["Traceback (most recent call last):", '  File "a.py", line 1, in f', "    g()",
      '  File "b.py", line 2, in g', "    raise X", "X: boom"], [0, 1, 1, 2, 2, 2]),
    (["src/a.py:1:import os", "src/a.py:9:os.path", "src/b.py:3:os.sep"], [0, 0, 1]),
    (["     1\timport os", "     2\t", "     3\tdef f():", "     4\t    return 1", "     5\tclass C:"], [0, 0, 1, 1, 2]),
    (["first para", "still first", "", "second para", "", "", "third"], [0, 0, 0, 1, 1, 1, 2]),
])
def test_blocks_of_each_output_kind(lines, expected):
    assert block_ids(lines).tolist() == expected


def test_terms_split_identifiers_and_keep_them_whole():
    assert subwords("parse_config ParseConfig HTTPServer") == ["parse", "config", "parse", "config", "http", "server"]
    assert "test_parse_config" in terms("why does test_parse_config fail")
    assert symbols("E501 in src/utils.py from ParseConfig or test_foo, not in a sentence") == [
        "E501", "src/utils.py", "ParseConfig", "test_foo"]


def test_the_block_the_query_names_is_the_best_block_among_look_alikes():
    names = [f"test_case_{i}" for i in range(12)]
    lines = pytest_log(names)
    features = line_features("why does test_case_7 fail", lines, np.full(len(lines), 0.5))
    best = col(features, "block_is_best")
    named = next(i for i, line in enumerate(lines) if "test_case_7 " in line)
    assert set(np.flatnonzero(best)) == set(range(named, named + 5))
    assert col(features, "any_exact")[named] == 1 and col(features, "any_exact").sum() == 1
    assert col(features, "block_exact")[named + 3] == 1


def test_an_exact_symbol_outscores_its_paraphrase_lexically():
    lines = ["the configuration parser failed", "parse_config raised KeyError", "unrelated"]
    features = line_features("where is parse_config raising", lines, np.array([0.6, 0.4, 0.1]))
    assert col(features, "exact_hits").tolist() == [0, 1, 0]
    assert col(features, "bm25_rel")[1] == 1.0 > col(features, "bm25_rel")[0]


def test_encoder_columns_follow_the_scores():
    features = line_features("q", ["a", "b", "c", ""], np.array([0.9, 0.1, 0.5, 0.5]))
    assert col(features, "enc_rank").tolist() == [0.0, 0.75, 0.25, 0.25]
    assert col(features, "enc_gap_to_max")[0] == 0 and col(features, "enc_gap_to_max")[1] < 0
    assert col(features, "neighbour_enc_max")[1] == pytest.approx(np.log(0.9 / 0.1))
    assert col(features, "blank").tolist() == [0, 0, 0, 1]


def test_empty_and_single_line_outputs():
    assert line_features("q", [], np.zeros(0)).shape == (0, len(FEATURES))
    assert np.isfinite(line_features("q", ["x"], np.array([0.5]))).all()


@pytest.mark.timeout(120)  # a hang guard, not a speed target: the unbounded regexes took hours on this line
def test_a_megabyte_line_without_spaces_is_segmented_from_its_head():
    """base64 or minified JS in a tool output: the block regexes backtracked over the whole line (12 s for
    50 KB of ``a/``, growing with its square), inside a replica's scoring thread where no timeout reaches."""
    lines = ["src/app.py:3: x = 1", "a/" * 1_000_000, "src/app.py:9: y = 2", "tests/t.py:1: z"]
    ids = block_ids(lines)
    assert ids.tolist() == [0, 0, 0, 1]  # the long line opens no block; the grep file change still does


def test_only_the_head_of_a_pasted_huge_query_counts():
    """Every feature costs (query terms x output): a megabyte query took minutes. The query is cut to the
    1,000 characters the prompt contract keeps; what follows changes nothing."""
    lines = ["def parse_config(path):", "    return load_yaml(path)", "def other_helper():", "    pass"]
    head = "where is parse_config defined " + "x" * 970
    tail = " other_helper load_yaml " * 40_000
    probs = np.full(len(lines), 0.2)
    assert np.array_equal(line_features(head + tail, lines, probs), line_features(head, lines, probs))
    assert symbols("a_b " * 3 + "c_d") == ["a_b", "c_d"]  # first-seen order, each once
