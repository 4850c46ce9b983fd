"""Blind agreement against the gold the splits carry: a pass-W revision replaces pass A's (issue #35)."""

from __future__ import annotations

from squeez_ray.label.hand.agreement import blind_agreement

POOL = {"o1": {"family": "read_file"}, "o2": {"family": "grep"}}


def _row(output_id: str, query: str, gold: list[list[int]], pass_: str) -> dict:
    return {"output_id": output_id, "query": query, "gold": gold, "pass": pass_}


def test_blind_pass_is_compared_with_the_revised_gold_where_one_exists():
    labels = [
        _row("o1", "how does f work", [[3, 3]], "A"),  # narrow first gold
        _row("o1", "How does  f work", [[2, 5]], "W"),  # widened to the block (case and spacing aside)
        _row("o1", "how does f work", [[2, 5]], "B"),  # the blind labeller picked the block too
        _row("o2", "where is g", [[7, 7]], "A"),  # not revised: compared with pass A as before
        _row("o2", "where is g", [[7, 7]], "B"),
        _row("o2", "an unrevised W target", [[1, 1]], "W"),  # names no pass-A row: ignored
    ]
    agreement = blind_agreement(labels, POOL)
    assert agreement["pairs"] == 2
    assert agreement["line_f1"] == 1.0 and agreement["exact"] == 1.0
    assert agreement["by_family"]["read_file"] == {"pairs": 1, "line_f1": 1.0}
    revised = agreement["revised"]
    assert revised["pairs"] == 1 and revised["line_f1"] == 1.0
    assert revised["line_f1_first"] == 0.4  # 1 of B's 4 lines is pass A's one line: P 0.25, R 1.0


def test_without_revisions_the_figures_are_pass_a_against_pass_b():
    labels = [_row("o1", "q", [[3, 3]], "A"), _row("o1", "q", [[3, 4]], "B")]
    agreement = blind_agreement(labels, POOL)
    assert agreement["pairs"] == 1 and agreement["exact"] == 0.0
    assert round(agreement["line_f1"], 3) == 0.667
    assert agreement["revised"] == {"pairs": 0, "line_f1": None, "line_f1_first": None}
