"""Verbatim mapping: generated lines -> source line numbers; the rest dropped and counted."""

from __future__ import annotations

from squeez_ray.infer.mapping import map_lines_to_spans

SOURCE = """def f(x):
    if x:
        return 1
    }
    return 2
}

def g():
    raise ValueError("bad value for parameter alpha")
}"""


def test_exact_lines_map_to_their_numbers_and_spans():
    m = map_lines_to_spans(["    if x:", "        return 1"], SOURCE)
    assert m.line_numbers == [2, 3] and m.spans == [(2, 3)] and m.unmatched == 0 and m.fuzzy == 0


def test_strip_and_inner_whitespace_differences_still_match_exactly():
    m = map_lines_to_spans(["if x:", "return    1  ", "\traise ValueError(\"bad value for parameter alpha\")"], SOURCE)
    assert m.line_numbers == [2, 3, 9] and m.fuzzy == 0 and m.unmatched == 0


def test_repeated_lines_resolve_by_order():
    # "}" occurs at 4, 6 and 10: each one is the first occurrence after the previous match.
    m = map_lines_to_spans(["return 1", "}", "return 2", "}"], SOURCE)
    assert m.line_numbers == [3, 4, 5, 6]
    m = map_lines_to_spans(['raise ValueError("bad value for parameter alpha")', "}"], SOURCE)
    assert m.line_numbers == [9, 10]


def test_out_of_order_block_falls_back_to_first_occurrence():
    m = map_lines_to_spans(["def g():", "def f(x):"], SOURCE)
    assert m.line_numbers == [1, 8]


def test_fuzzy_match_above_threshold_only():
    near = 'raise ValueError("bad value for parameter alfa")'  # one letter off
    m = map_lines_to_spans([near], SOURCE, threshold=90)
    assert m.line_numbers == [9] and m.fuzzy == 1 and m.unmatched == 0
    assert map_lines_to_spans([near], SOURCE, threshold=99).line_numbers == []
    assert map_lines_to_spans([near], SOURCE, threshold=101).unmatched == 1  # > 100 turns fuzzy off


def test_fuzzy_prefers_the_window_between_neighbouring_matches():
    source = ["start", "value = compute(alpha, beta)", "x", "middle", "value = compute(alpha, beta)", "end"]
    typo = "value = compute(alpha, betta)"
    assert map_lines_to_spans(["middle", typo, "end"], source).line_numbers == [4, 5, 6]
    assert map_lines_to_spans(["start", typo, "x"], source).line_numbers == [1, 2, 3]


def test_hallucinated_lines_are_dropped_and_counted():
    m = map_lines_to_spans(["return 1", "this line was never printed", "AssertionError: totally invented"], SOURCE)
    assert m.line_numbers == [3] and m.unmatched == 2


def test_blank_lines_only_kept_inside_a_copied_block():
    m = map_lines_to_spans(["}", "", "def g():"], SOURCE.split("\n")[5:], first_line=6)
    assert m.line_numbers == [6, 7, 8] and m.unmatched == 0
    m = map_lines_to_spans(["", "return 2", ""], SOURCE)
    assert m.line_numbers == [5] and m.unmatched == 0


def test_first_line_offsets_a_chunk():
    chunk = SOURCE.split("\n")[7:]
    m = map_lines_to_spans(["def g():", "}"], chunk, first_line=8)
    assert m.line_numbers == [8, 10] and m.spans == [(8, 8), (10, 10)]


def test_empty_reply_keeps_nothing():
    m = map_lines_to_spans([], SOURCE)
    assert m.line_numbers == [] and m.spans == [] and m.unmatched == 0


def test_cut_reply_last_line_maps_by_prefix_only_when_marked_partial():
    cut = ["    if x:", 'raise ValueError("bad val']
    assert map_lines_to_spans(cut, SOURCE).line_numbers == [2]
    m = map_lines_to_spans(cut, SOURCE, partial_last=True)
    assert m.line_numbers == [2, 9] and m.unmatched == 0
    assert map_lines_to_spans(["if x:", "raise"], SOURCE, partial_last=True).unmatched == 1  # too short to trust
