"""The stored hand-labelled set (data/handlabel) keeps the promises of LABELLING.md and issue #12."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from squeez_ray.dataset.datasheet import load_built, summarise
from squeez_ray.label.hand.labels import check_label_files
from squeez_ray.collect.pool import FAMILIES, check_digest, read_pool
from squeez_ray.collect.sources.reserved import reserved_use

DATA = Path(__file__).resolve().parents[2] / "data" / "handlabel"


@pytest.fixture(scope="module")
def pool():
    return read_pool(DATA / "outputs.parquet")


@pytest.fixture(scope="module")
def examples():
    return load_built(DATA)


def test_every_label_file_passes_the_checker_against_the_stored_outputs(pool):
    good, problems = check_label_files(sorted((DATA / "labels").glob("*.jsonl")), pool)
    assert problems == [] and len(good) > 0


def test_outputs_are_unedited_and_from_no_reserved_source(pool):
    assert all(check_digest(row) for row in pool.values())
    assert [reserved_use(r["source"], r["command"]) for r in pool.values() if reserved_use(r["source"], r["command"])] == []


def test_size_coverage_and_balance(examples, pool):
    s = summarise(examples, pool)
    assert s["examples"] >= 2000 and s["negatives"] >= 200
    assert len(s["families"]) >= 12 and set(s["families"]) <= set(FAMILIES)
    assert s["largest_family_share"] <= 0.25
    assert s["over_800_lines"] >= 0.10 * s["examples"]


def test_no_source_crosses_splits_and_every_example_says_its_pass(examples):
    split_of: dict[str, set[str]] = {}
    for e in examples:
        split_of.setdefault(e["repo"], set()).add(e["split"])
        assert json.loads(e["notes"])["pass"] == "A" and json.loads(e["notes"])["labeller"]
    assert all(len(splits) == 1 for splits in split_of.values())
    assert Counter(e["split"] for e in examples).keys() == {"train", "dev", "test"}


def test_the_set_stays_small_enough_for_the_repository():
    total = sum(f.stat().st_size for f in DATA.rglob("*") if f.is_file())
    assert total < 25 * 1024 * 1024


def test_blind_second_labelling_covers_150_examples():
    agreement = json.loads((DATA / "agreement.json").read_text())
    assert agreement["blind"]["pairs"] >= 150
    assert 0.0 <= agreement["blind"]["line_f1"] <= 1.0
