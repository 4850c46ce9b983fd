"""Line-aligned overlapping chunks that fit a token budget; over-long lines truncated for display only."""

from __future__ import annotations

import math

import pytest

from squeez_ray.infer.chunking import Chunk, split_into_chunks, truncate_to_tokens


def chars4(text: str) -> int:
    return math.ceil(len(text) / 4)


def plan(lines, budget, overlap=2):
    return split_into_chunks(lines, [chars4(line) + 1 for line in lines], budget, overlap_lines=overlap,
                             count_tokens=chars4)


def test_chunks_cover_every_line_in_order_with_overlap():
    lines = [f"line {i:04d} some text" for i in range(100)]  # 6 tokens + newline each
    chunks = plan(lines, budget=70, overlap=2)
    assert len(chunks) >= 3
    covered = set()
    for chunk in chunks:
        assert sum(chars4(line) + 1 for line in chunk.lines) <= 70
        assert list(chunk.lines) == lines[chunk.first_line - 1:chunk.last_line]
        covered.update(range(chunk.first_line, chunk.last_line + 1))
    assert covered == set(range(1, 101))
    for before, after in zip(chunks, chunks[1:]):
        assert after.first_line == before.last_line - 1  # two lines of overlap
    assert chunks[-1].last_line == 100


def test_overlap_larger_than_a_chunk_still_makes_progress():
    lines = [f"l{i}" for i in range(50)]
    chunks = plan(lines, budget=10, overlap=100)
    assert chunks[-1].last_line == 50
    assert all(b.first_line > a.first_line for a, b in zip(chunks, chunks[1:]))
    assert len(chunks) < 50


def test_over_long_line_is_truncated_for_display_but_keeps_its_number():
    lines = ["short", "x" * 4000, "after"]
    chunks = plan(lines, budget=40, overlap=0)
    shown = [(c.first_line + i, line) for c in chunks for i, line in enumerate(c.lines)]
    numbers = [n for n, _ in shown]
    assert sorted(set(numbers)) == [1, 2, 3]
    long_shown = [line for n, line in shown if n == 2][0]
    assert "x" * 10 in long_shown and chars4(long_shown) <= 20 and "x" * 4000 not in long_shown


def test_truncate_to_tokens_finds_the_longest_fitting_prefix():
    assert truncate_to_tokens("abcdefghij", 2, chars4) == "abcdefgh"
    assert truncate_to_tokens("abc", 5, chars4) == "abc"


def test_budget_must_be_positive():
    with pytest.raises(ValueError, match="at least one token"):
        plan(["a"], budget=0)


def test_chunk_text_joins_lines():
    assert Chunk(3, ("a", "b")).text == "a\nb" and Chunk(3, ("a", "b")).last_line == 4
