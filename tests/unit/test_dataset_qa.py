"""QA filters: each drop reason on a hand-made example, counted; good rows kept in order."""

from __future__ import annotations

import pytest

from squeez_ray.dataset import qa

OUTPUT = "\n".join(f"line {i}" for i in range(1, 11))  # 10 lines


def example(**fields):
    row = {"instance_id": "i1", "command": "cmd", "query": "q?", "tool_output": OUTPUT,
           "gold_spans": [{"start_line": 2, "end_line": 3}], "is_irrelevant": False}
    row.update(fields)
    return row


@pytest.mark.parametrize("fields,reason", [
    ({"gold_spans": [{"start_line": 9, "end_line": 11}]}, qa.INVALID_SPANS),
    ({"gold_spans": [[0, 1]]}, qa.INVALID_SPANS),
    ({"query": "  "}, qa.EMPTY_QUERY),
    ({"tool_output": "a\nb\nc", "gold_spans": [[1, 1]]}, qa.TOO_FEW_LINES),
    ({"gold_spans": []}, qa.POSITIVE_WITHOUT_SPANS),
    ({"is_irrelevant": True}, qa.NEGATIVE_WITH_SPANS),
    ({"gold_spans": [[1, 6]]}, qa.RELEVANT_SHARE_TOO_HIGH),
])
def test_reasons(fields, reason):
    assert qa.check(example(**fields), qa.QAConfig()) == reason


def test_exactly_half_is_allowed_and_negatives_pass():
    assert qa.check(example(gold_spans=[[1, 5]]), qa.QAConfig()) is None
    assert qa.check(example(gold_spans=[], is_irrelevant=True), qa.QAConfig()) is None


def test_filter_counts_drops_and_dedups_by_instance_and_command():
    rows = [example(), example(query="another"), example(command="other"), example(gold_spans=[]),
            example(instance_id="i2")]
    kept, dropped = qa.filter_examples(rows, qa.QAConfig())
    assert [(r["instance_id"], r["command"]) for r in kept] == [("i1", "cmd"), ("i1", "other"), ("i2", "cmd")]
    assert dropped == {qa.DUPLICATE: 1, qa.POSITIVE_WITHOUT_SPANS: 1}
    kept, dropped = qa.filter_examples(rows, qa.QAConfig(dedup=False))
    assert len(kept) == 4


def test_config_checks():
    assert qa.QAConfig(min_output_lines=0, max_relevant_share=1.5).validate() == [
        "min_output_lines: must be >= 1, got 0", "max_relevant_share: must be in (0, 1], got 1.5"]
