"""METRICS.md sections 2 and 3 on hand-computed examples."""

from __future__ import annotations

import pytest

from squeez_ray.metrics import (REQUIRED_KEYS, exact_match, fuzzy_scores, line_compression,
                                         line_index_scores, norm, pair_score, score_example, span_recall,
                                         strict_scores, summarize, summarize_by_tool)

approx = pytest.approx


def test_norm_strips_and_drops_blank_lines():
    assert norm("  a \n\n\t\n b\r\n") == ["a", "b"]
    assert norm("") == []


def test_empty_and_empty_is_perfect():
    assert strict_scores([], []) == (1.0, 1.0, 1.0)
    assert fuzzy_scores([], []) == (1.0, 1.0, 1.0)
    assert exact_match([], []) == 1.0
    assert line_index_scores([], []) == (1.0, 1.0, 1.0)


@pytest.mark.parametrize("pred,gold", [(["a"], []), ([], ["a"])])
def test_one_side_empty_scores_zero(pred, gold):
    assert strict_scores(pred, gold) == (0.0, 0.0, 0.0)
    assert fuzzy_scores(pred, gold) == (0.0, 0.0, 0.0)
    assert exact_match(pred, gold) == 0.0


def test_duplicate_lines_collapse_in_strict_but_count_in_fuzzy():
    pred, gold = ["x", "x", "y"], ["x", "z"]
    # strict: {x, y} vs {x, z}: tp 1 -> P 1/2, R 1/2
    assert strict_scores(pred, gold) == (0.5, 0.5, 0.5)
    # fuzzy: both "x" want the one gold "x"; one-letter lines have no bigrams -> tp 1 of 3 and of 2
    p, r, f1 = fuzzy_scores(pred, gold)
    assert (p, r) == (approx(1 / 3), 0.5) and f1 == approx(0.4)
    assert exact_match(["x", "x"], ["x"]) == 1.0


def test_substring_pairs_score_their_length_ratio():
    assert pair_score("return x", "return x + 1") == approx(8 / 12)
    assert fuzzy_scores(["return x"], ["return x + 1"]) == (1.0, 1.0, 1.0)
    assert strict_scores(["return x"], ["return x + 1"]) == (0.0, 0.0, 0.0)
    # A substring scores its length ratio even when the bigram Dice would be higher (0.8 here).
    assert pair_score("abc", "abcabcabc") == approx(1 / 3)
    assert fuzzy_scores(["abc"], ["abcabcabc"]) == (0.0, 0.0, 0.0)


def test_bigram_pairs_score_dice():
    # context {co,on,nt,te,ex,xt} vs contest {co,on,nt,te,es,st}: 2*4/12
    assert pair_score("context", "contest") == approx(2 / 3)
    # night {ni,ig,gh,ht} vs nacht {na,ac,ch,ht}: 2*1/8
    assert pair_score("night", "nacht") == approx(0.25)
    assert fuzzy_scores(["night"], ["nacht"]) == (0.0, 0.0, 0.0)
    assert pair_score("a", "b") == 0.0  # no bigrams


def test_the_half_threshold_is_inclusive():
    assert pair_score("abc", "abcdef") == 0.5  # substring, 3/6
    assert fuzzy_scores(["abc"], ["abcdef"]) == (1.0, 1.0, 1.0)
    assert pair_score("abcde", "abcxy") == 0.5  # Dice {ab,bc,cd,de} vs {ab,bc,cx,xy}: 2*2/8
    assert fuzzy_scores(["abcde"], ["abcxy"]) == (1.0, 1.0, 1.0)
    assert pair_score("abcde", "abxyz") == 0.25
    assert fuzzy_scores(["ab"], ["abcde"]) == (0.0, 0.0, 0.0)  # 2/5 < 0.5


def test_greedy_matching_takes_the_best_score_first():
    # "abcdef" matches gold exactly (1.0) and "abc" only as a substring (0.5): the exact pair wins,
    # so "abc" is left without a partner.
    assert fuzzy_scores(["abc", "abcdef"], ["abcdef"]) == (0.5, 1.0, approx(2 / 3))


def test_compression_counts_an_empty_prediction_as_one_line():
    output = "\n".join(str(i) for i in range(10))
    assert line_compression("", output) == approx(0.9)
    assert line_compression("3", output) == approx(0.9)
    assert line_compression("3\n4", output) == approx(0.8)
    assert line_compression(output, output) == 0.0


def test_line_index_scores_are_position_aware():
    # Keeping the first "}" when gold is the last one: text scores are perfect, line-index scores 0.
    row = score_example("}\na\n}", gold_spans=[(3, 3)], pred_spans=[(1, 1)])
    assert (row["precision"], row["recall"], row["f1"], row["exact"]) == (1.0, 1.0, 1.0, 1.0)
    assert (row["line_precision"], row["line_recall"], row["line_f1"]) == (0.0, 0.0, 0.0)


def test_span_recall_at_half_tolerance():
    assert span_recall([1, 2], [(1, 4), (6, 6)]) == 0.5  # 2 of 4 lines of the first span is enough
    assert span_recall([1], [(1, 4)]) == 0.0
    assert span_recall([1], []) is None


def test_score_example_on_a_small_output():
    output = "alpha\nbeta\ngamma\ndelta\n\nomega"
    row = score_example(output, gold_spans=[(2, 3)], pred_spans=[(3, 4)])
    # pred {gamma, delta} vs gold {beta, gamma}: tp 1
    assert (row["precision"], row["recall"], row["exact"]) == (0.5, 0.5, 0.0)
    # fuzzy: gamma=gamma (1.0); delta vs beta: {de,el,lt,ta} vs {be,et,ta}: 2*1/7 < 0.5
    assert row["f1"] == 0.5
    assert row["compression"] == approx(1 - 2 / 6) and row["gold_compression"] == approx(1 - 2 / 6)
    assert row["char_compression"] == approx(1 - len("gamma\ndelta") / len(output))
    assert row["token_compression"] == approx(row["char_compression"])  # chars / 4 on both sides
    words = score_example(output, [(2, 3)], [(3, 4)], count_tokens=lambda t: len(t.split()))
    assert words["token_compression"] == approx(1 - 2 / 5)
    assert (row["kept_lines"], row["total_lines"], row["gold_lines"]) == (2, 6, 2)
    assert row["is_negative"] is False and row["pred_empty"] is False


def test_summarize_means_and_negatives_empty_rate():
    rows = [
        {**score_example("a\nb", [(1, 1)], [(1, 1)]), "tool_type": "grep", "pruned": True},
        {**score_example("a\nb", [], []), "tool_type": "grep", "pruned": True},
        {**score_example("a\nb", [], [(2, 2)]), "tool_type": "read_file", "pruned": False},
    ]
    overall = summarize(rows)
    assert tuple(overall)[: len(REQUIRED_KEYS)] == REQUIRED_KEYS
    assert overall["n"] == 3 and overall["n_negatives"] == 2 and overall["n_unpruned"] == 1
    assert overall["negatives_empty"] == 0.5
    assert overall["recall"] == approx(2 / 3) and overall["f1"] == approx(2 / 3)
    assert overall["span_recall"] == 1.0  # only the one row with gold counts
    by_tool = summarize_by_tool(rows)
    assert set(by_tool) == {"grep", "read_file"} and by_tool["read_file"]["negatives_empty"] == 0.0
    assert summarize(rows[:1])["negatives_empty"] is None


def test_a_prediction_of_blank_lines_counts_as_empty_on_a_negative():
    row = score_example("a\n\nb", gold_spans=[], pred_spans=[(2, 2)])
    assert row["is_negative"] and row["pred_empty"] and row["precision"] == 1.0
    assert summarize([{**row, "tool_type": "t"}])["negatives_empty"] == 1.0
