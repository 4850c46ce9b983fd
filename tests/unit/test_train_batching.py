"""Token-budget batching: no padded batch over budget, every example once, equal steps per worker, reproducible."""

from __future__ import annotations

import random

import pytest

from squeez_ray.train.batching import BatchPlanError, padded_tokens, plan_token_batches


def _lengths(n=500, seed=3):
    rng = random.Random(seed)
    # Mostly short tool outputs with a long tail, as real tool-output sets have.
    return [min(20000, int(rng.lognormvariate(7.5, 1.0)) + 50) for _ in range(n)]


@pytest.mark.parametrize("budget,cap", [(20000, 8), (40000, 8), (160000, 8), (20000, 1)])
def test_no_batch_over_budget_and_every_example_once(budget, cap):
    lengths = _lengths()
    batches = plan_token_batches(lengths, max_tokens=budget, max_examples=cap, seed=1)
    assert all(padded_tokens(b, lengths) <= budget and 1 <= len(b) <= cap for b in batches)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))


def test_length_grouping_pads_far_less_than_a_fixed_count():
    lengths = _lengths()
    planned = plan_token_batches(lengths, max_tokens=8 * 20000, max_examples=8, seed=0)
    fixed = [list(range(i, min(i + 8, len(lengths)))) for i in range(0, len(lengths), 8)]
    assert sum(padded_tokens(b, lengths) for b in planned) < 0.5 * sum(padded_tokens(b, lengths) for b in fixed)


def test_the_plan_is_reproducible_and_the_seed_shuffles_the_order():
    lengths = _lengths()
    a = plan_token_batches(lengths, max_tokens=40000, max_examples=8, seed=5)
    assert a == plan_token_batches(lengths, max_tokens=40000, max_examples=8, seed=5)
    b = plan_token_batches(lengths, max_tokens=40000, max_examples=8, seed=6)
    assert a != b and sorted(map(tuple, a)) == sorted(map(tuple, b))


@pytest.mark.parametrize("workers", [2, 3, 4, 7])
def test_batch_count_is_a_multiple_of_the_workers_without_losing_examples(workers):
    lengths = _lengths(101)
    batches = plan_token_batches(lengths, max_tokens=30000, max_examples=8, seed=0, num_workers=workers)
    assert len(batches) % workers == 0
    assert sorted(i for b in batches for i in b) == list(range(101))
    assert all(padded_tokens(b, lengths) <= 30000 for b in batches)


def test_single_example_batches_leave_the_remainder_out_as_the_equal_split_does():
    batches = plan_token_batches([100, 100, 100], max_tokens=100, max_examples=8, num_workers=2)
    assert len(batches) == 2 and all(len(b) == 1 for b in batches)


def test_an_example_over_the_budget_is_a_clear_error():
    with pytest.raises(BatchPlanError, match="longer than the token budget 1000"):
        plan_token_batches([10, 2000], max_tokens=1000, max_examples=4)
    with pytest.raises(BatchPlanError, match="cannot be split across 4 workers"):
        plan_token_batches([10, 20], max_tokens=1000, max_examples=4, num_workers=4)
