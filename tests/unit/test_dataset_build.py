"""build_dataset: QA -> group splits -> negatives -> Parquet the schema (and training) reads."""

from __future__ import annotations

import json

import pytest

from squeez_ray.dataset.build import BuildConfig, build_dataset, build_from_examples
from squeez_ray.dataset.negatives import NEGATIVE_SOURCE, make_negatives, negatives_needed
from squeez_ray.schema import DataError, read_examples, write_examples

TOOLS = ("read_file", "grep", "test_output", "git_log")


def examples(n_repos=12, per_repo=8):
    rows = []
    for r in range(n_repos):
        for k in range(per_repo):
            tool = TOOLS[k % len(TOOLS)]
            output = "\n".join(f"{tool} repo{r} item{k} line {i}" for i in range(1, 13))
            rows.append({"instance_id": f"org__repo{r}-{k}", "source": "swe", "tool_type": tool,
                         "query": f"Which line holds item{k}?", "tool_output": output,
                         "gold_spans": [{"start_line": 3, "end_line": 4}], "is_irrelevant": False,
                         "command": f"cmd {k}", "repo": f"org/repo{r}"})
    return rows


def test_build_writes_disjoint_splits_with_negatives(tmp_path):
    rows = examples() + [dict(examples()[0], gold_spans=[])]  # one positive without spans: dropped
    manifest = build_from_examples(rows, BuildConfig(output_dir=str(tmp_path), negatives_share=0.2))
    splits = {s: read_examples(tmp_path / f"{s}.parquet") for s in ("train", "dev", "test")}
    assert all(splits.values())
    repos = {s: {r["repo"] for r in rows} for s, rows in splits.items()}
    assert not (repos["train"] & repos["dev"]) and not (repos["train"] & repos["test"]) and not (repos["dev"] & repos["test"])
    for split, rows_ in splits.items():
        assert {r["split"] for r in rows_} == {split}
        negatives = [r for r in rows_ if r["is_irrelevant"]]
        positives = [r for r in rows_ if not r["is_irrelevant"]]
        assert negatives and all(r["source"] == NEGATIVE_SOURCE and r["gold_spans"] == [] for r in negatives)
        assert len(negatives) == negatives_needed(len(positives), 0.2)
        # a negative's query comes from the same split, never from another split's repository
        own_queries = {r["query"] for r in positives}
        assert all(r["query"] in own_queries for r in negatives)
        assert all(r["tool_type"] != next(p["tool_type"] for p in positives if p["query"] == r["query"])
                   for r in negatives)
    assert manifest["dropped"] == {"positive_without_spans": 1}
    assert manifest["counts"]["after_qa"] == 96
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert {row["family"] for row in stats} == set(TOOLS)
    assert "| family |" in (tmp_path / "stats.md").read_text()
    # the folder is a training input: every Parquet file under it is a split of the same schema
    assert len(read_examples(tmp_path)) == sum(len(v) for v in splits.values())


def test_build_job_is_deterministic_and_skips_when_current(tmp_path):
    write_examples(examples(), tmp_path / "labelled.parquet")
    config = BuildConfig(inputs=[str(tmp_path / "labelled.parquet")], output_dir=str(tmp_path / "out"))
    first = build_dataset(config)
    stamp = (tmp_path / "out" / "train.parquet").stat().st_mtime_ns
    again = build_dataset(config)
    assert again == first and (tmp_path / "out" / "train.parquet").stat().st_mtime_ns == stamp
    rebuilt = build_dataset(BuildConfig(**{**config.__dict__, "overwrite": True, "output_dir": str(tmp_path / "o2")}))
    assert rebuilt["counts"] == first["counts"]
    a = read_examples(tmp_path / "out" / "test.parquet")
    b = read_examples(tmp_path / "o2" / "test.parquet")
    assert a == b


def test_bad_input_names_file_row_and_field(tmp_path):
    bad = tmp_path / "bad.jsonl"
    good = json.dumps(examples(1, 1)[0])
    bad.write_text(good + "\n" + good.replace('"start_line": 3', '"start_line": 30') + "\n")
    with pytest.raises(DataError) as error:
        build_dataset(BuildConfig(inputs=[str(bad)], output_dir=str(tmp_path / "out")))
    assert "bad.jsonl" in str(error.value) and "row 2" in str(error.value) and "gold_spans" in str(error.value)
    with pytest.raises(DataError, match="does not exist"):
        build_dataset(BuildConfig(inputs=[str(tmp_path / "missing.parquet")], output_dir=str(tmp_path / "out")))


def test_negatives_skip_outputs_that_mention_the_query_names():
    rows = [{"instance_id": "a", "tool_type": "grep", "query": "Where is parse_args defined?", "tool_output": "x",
             "repo": "r"},
            {"instance_id": "b", "tool_type": "read_file", "query": "What does main do?",
             "tool_output": "def parse_args():\n    pass", "repo": "r"}]
    negatives = make_negatives(rows, 5, seed=0)
    assert [n["query"] for n in negatives] == ["What does main do?"]  # never the parse_args query on b's output


def test_runs_of_one_instance_get_their_own_ids_and_stay_in_one_split(tmp_path):
    # An instance yields several tool runs, each labelled under the instance's id (the quickstart
    # sample does this); evaluation refuses duplicate ids, so the build must make them unique
    # without splitting an instance across train/dev/test.
    rows = [dict(r, repo=None, instance_id=f"inst{i // 4}") for i, r in enumerate(examples(n_repos=6))]
    build_from_examples(rows, BuildConfig(output_dir=str(tmp_path), negatives_share=0.0))
    written = {s: read_examples(tmp_path / f"{s}.parquet", for_evaluation=True) for s in ("train", "dev", "test")}
    ids = [r["instance_id"] for rows_ in written.values() for r in rows_]
    assert len(ids) == len(set(ids)) == len(rows)
    assert "inst0#0" in ids and "inst0#3" in ids
    split_of_instance = {}
    for split, rows_ in written.items():
        for r in rows_:
            assert split_of_instance.setdefault(r["instance_id"].split("#")[0], split) == split


def test_a_grown_set_keeps_every_source_in_its_earlier_split(tmp_path):
    # Without pinning, adding examples reshuffles groups toward the ratios, moving sources a model
    # was trained on into test. With the earlier manifest's groups pinned, only new groups are placed.
    from squeez_ray.dataset.build import previous_splits

    build_from_examples(examples(n_repos=12), BuildConfig(output_dir=str(tmp_path / "v1"), negatives_share=0.0))
    before = previous_splits(tmp_path / "v1" / "manifest.json")
    assert set(before.values()) == {"train", "dev", "test"}
    grown = examples(n_repos=12, per_repo=8) + examples(n_repos=16, per_repo=30)[12 * 30:]  # 4 new repos
    grown += [dict(r, instance_id=r["instance_id"] + "-more") for r in examples(n_repos=3, per_repo=40)]
    build_from_examples([dict(r) for r in grown], BuildConfig(output_dir=str(tmp_path / "free"),
                                                         negatives_share=0.0))
    moved = {g for g, s in previous_splits(tmp_path / "free" / "manifest.json").items() if before.get(g, s) != s}
    assert moved, "the scenario must move a group without pinning, or it tests nothing"
    build_from_examples([dict(r) for r in grown], BuildConfig(output_dir=str(tmp_path / "v2"), negatives_share=0.0),
                        pinned_splits=before)
    after = previous_splits(tmp_path / "v2" / "manifest.json")
    assert {g: after[g] for g in before} == before
    assert set(after) - set(before) == {f"repo:org/repo{r}" for r in range(12, 16)}
