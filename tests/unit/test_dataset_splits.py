"""Group splits: deterministic, disjoint by repository, close to the ratios, every split used."""

from __future__ import annotations

import pytest

from squeez_ray.dataset.splits import assign_splits, check_ratios, group_of

RATIOS = {"train": 0.8, "dev": 0.1, "test": 0.1}


def test_same_input_same_assignment_and_seed_changes_it():
    sizes = {f"repo:org/r{i}": 10 + i for i in range(40)}
    first = assign_splits(sizes, RATIOS, seed=0)
    assert first == assign_splits(dict(reversed(list(sizes.items()))), RATIOS, seed=0)
    assert first != assign_splits(sizes, RATIOS, seed=1)


def test_every_group_in_exactly_one_split_and_shares_near_ratios():
    sizes = {f"repo:org/r{i}": 5 + (i * 7) % 13 for i in range(60)}
    split_of = assign_splits(sizes, RATIOS, seed=3)
    assert set(split_of) == set(sizes)
    total = sum(sizes.values())
    for split, ratio in RATIOS.items():
        share = sum(n for g, n in sizes.items() if split_of[g] == split) / total
        assert abs(share - ratio) < 0.05, (split, share)


def test_few_groups_still_fill_dev_and_test_without_the_big_repo():
    sizes = {"repo:big": 500, "repo:a": 20, "repo:b": 30, "repo:c": 25, "repo:d": 10}
    split_of = assign_splits(sizes, RATIOS, seed=0)
    assert set(split_of.values()) == {"train", "dev", "test"}
    assert split_of["repo:big"] == "train"


def test_zero_ratio_split_stays_empty():
    split_of = assign_splits({f"g{i}": 1 for i in range(10)}, {"train": 0.9, "dev": 0.0, "test": 0.1})
    assert "dev" not in split_of.values()


def test_bad_ratios_are_named():
    assert check_ratios({"train": 0.8, "dev": 0.1}) == ["ratios: must sum to 1, got 0.9 ({'train': 0.8, 'dev': 0.1})"]
    assert "ratios.valid: unknown split" in check_ratios({"train": 0.9, "valid": 0.1})[0]
    with pytest.raises(ValueError, match="must sum to 1"):
        assign_splits({"g": 1}, {"train": 0.5})


def test_group_of_prefers_explicit_group_then_repo():
    assert group_of({"split_group_id": "synth-group:js", "repo": "x", "instance_id": "i"}) == "synth-group:js"
    assert group_of({"repo": "pallets/flask", "instance_id": "i"}) == "repo:pallets/flask"
    assert group_of({"instance_id": "i"}) == "instance:i"
