"""Hand labelling: pool rows, rendering, the label checker and the file teacher's row function."""

from __future__ import annotations

import json

import pytest

from squeez_ray.label.hand.batches import plan_batches
from squeez_ray.label.hand.labels import check_label, check_label_files
from squeez_ray.collect.pool import check_pool_row, make_output_id, read_pool, write_pool
from squeez_ray.label.hand.render import render_output
from squeez_ray.collect.sources.reserved import is_reserved, reserved_use
from squeez_ray.label.file_teacher import INVALID_LABEL, NO_LABEL, file_label
from squeez_ray.label.stages import WORKING_DEFAULTS
from squeez_ray.schema import DataError

OUTPUT = "\n".join(f"line {i} of a test run" for i in range(1, 21))


def pool_row(output: str = OUTPUT, source: str = "pypi:six", family: str = "test_output", command: str = "pytest -q"):
    return {"output_id": make_output_id(source, command, output), "source": source, "family": family,
            "command": command, "cwd": ".", "exit_code": 1, "tool_output": output, "versions": "x 1.0",
            "licence": "MIT", "collected_at": "2026-11-23"}


def label(row, **kw):
    base = {"output_id": row["output_id"], "query": "which test fails", "gold": [[3, 4]], "difficulty": "easy",
            "pass": "A", "labeller": "A/test"}
    return {**base, **kw}


def test_output_id_proves_the_output_was_not_edited():
    row = pool_row()
    assert check_pool_row(row)["output_id"] == row["output_id"]
    edited = {**row, "tool_output": row["tool_output"].replace("line 3", "line three")}
    with pytest.raises(DataError, match="edited after collection"):
        check_pool_row(edited)


def test_pool_rejects_reserved_sources_and_unknown_families():
    with pytest.raises(DataError, match="reserved for evaluation"):
        check_pool_row(pool_row(source="pypi:more_itertools"))
    with pytest.raises(DataError, match="reserved for evaluation"):
        check_pool_row(pool_row(source="logs:apt", command="cat /var/log/apt/history.log"))
    with pytest.raises(DataError, match="unknown family"):
        check_pool_row(pool_row(family="weather"))


@pytest.mark.parametrize("name,reserved", [("click", True), ("More_Itertools", True), ("npm:ky", True),
                                           ("pypi/Markdown", True), ("six", False), ("mistune", False)])
def test_reserved_names_are_matched_like_pypi_names(name, reserved):
    assert is_reserved(name) is reserved


def test_shipped_data_configs_use_no_reserved_source():
    import yaml

    config = yaml.safe_load(open("jobs/configs/encoder_data.yaml"))
    used = [p["name"] for p in config["packages"]]
    assert [n for n in used if is_reserved(n)] == []
    assert reserved_use("dpkg:x", "dpkg -s bash") is not None


def test_pool_round_trips_through_zstd_parquet(tmp_path):
    rows = [pool_row(), pool_row(source="npm:zod", family="type_check", command="tsc --noEmit")]
    assert write_pool(rows, tmp_path / "pool.parquet") == 2
    import pyarrow.parquet as pq

    assert pq.ParquetFile(tmp_path / "pool.parquet").metadata.row_group(0).column(0).compression == "ZSTD"
    assert read_pool(tmp_path / "pool.parquet") == {r["output_id"]: r for r in rows}


def test_render_numbers_every_line_as_the_span_contract_counts():
    row = pool_row(output="first\n\n  indented\tTab\r\nlast")
    text = render_output(row, 1, 1)
    assert f"output_id: {row['output_id']}" in text and "command: pytest -q" in text
    body = text.split("-" * 100 + "\n", 1)[1].split("\nEND OF")[0].split("\n")
    assert body == ["1 | first", "2 | ", "3 |   indented\tTab\r", "4 | last"]


def test_batches_are_bounded_by_outputs_and_lines():
    rows = [pool_row(output="\n".join(["x"] * n), source=f"pypi:p{i}") for i, n in enumerate([10, 900, 50, 3000, 20])]
    batches = plan_batches(rows, max_outputs=3, max_lines=1000, seed=1)
    assert sorted(r["output_id"] for b in batches for r in b) == sorted(r["output_id"] for r in rows)
    for batch in batches:
        assert len(batch) <= 3
        assert len(batch) == 1 or sum(r["tool_output"].count("\n") + 1 for r in batch) <= 1000


def test_a_good_label_has_no_problem():
    row = pool_row()
    assert check_label(label(row), {row["output_id"]: row}) == []
    assert check_label(label(row, gold=[], difficulty="negative"), {row["output_id"]: row}) == []


@pytest.mark.parametrize("change,field,message", [
    ({"query": "  "}, "query", "is empty"),
    ({"query": "what fails on line 12"}, "query", "line number"),
    ({"query": "the error at conftest.py:12"}, "query", "line number"),
    ({"gold": [[0, 2]]}, "gold", "out of range"),
    ({"gold": [[19, 21]]}, "gold", "out of range"),
    ({"gold": [[5, 6], [1, 2]]}, "gold", "not after the previous one"),
    ({"gold": [[1, 2], [3, 4]]}, "gold", "not after the previous one"),
    ({"gold": [[1, 3], [2, 5]]}, "gold", "not after the previous one"),
    ({"gold": [[1, 1]], "difficulty": "negative"}, "gold", "a negative has no gold"),
    ({"gold": []}, "gold", "a positive needs gold"),
    ({"gold": [[1, 11]]}, "gold", "more than half"),
    ({"gold": "3-4"}, "gold", "list of [start, end]"),
    ({"gold": [[1.5, 2]]}, "gold", "pair of integers"),
    ({"difficulty": "hard"}, "difficulty", "not one of"),
    ({"pass": ""}, "pass", "is missing"),
    ({"labeller": None}, "labeller", "is missing"),
])
def test_each_rule_of_the_guide_is_checked(change, field, message):
    row = pool_row()
    problems = check_label(label(row, **change), {row["output_id"]: row})
    assert any(f == field and message in m for f, m in problems), problems


def test_a_query_that_pastes_a_long_gold_line_is_refused():
    output = "\n".join(["ok"] * 10 + ["AssertionError: expected the parser to return three fields"] + ["ok"] * 9)
    row = pool_row(output=output)
    problems = check_label(label(row, query="AssertionError: expected the parser to return three fields", gold=[[11, 11]]),
                           {row["output_id"]: row})
    assert [f for f, _ in problems] == ["query"]


def test_short_outputs_and_unknown_outputs_are_refused():
    short = pool_row(output="a\nb\nc")
    assert any("at least 5" in m for _, m in check_label(label(short, gold=[[1, 1]]), {short["output_id"]: short}))
    assert check_label(label(short, output_id="pypi:six:nope"), {})[0][0] == "output_id"


def test_label_files_report_every_problem_with_file_and_row(tmp_path):
    row = pool_row()
    path = tmp_path / "batch-001.A.jsonl"
    lines = [json.dumps(label(row)), "{not json", json.dumps(label(row)), json.dumps(label(row, query="where is x", gold=[]))]
    path.write_text("\n".join(lines) + "\n")
    good, problems = check_label_files([path], {row["output_id"]: row})
    assert len(good) == 1 and good[0]["label_file"] == "batch-001.A.jsonl"
    rendered = [str(p) for p in problems]
    assert any("row 2" in p and "not valid JSON" in p for p in rendered)
    assert any("row 3" in p and "duplicates" in p for p in rendered)
    assert any("row 4" in p and "a positive needs gold" in p for p in rendered)


def test_file_teacher_makes_one_example_per_label_and_leaves_unlabelled_rows():
    row = pool_row()
    working = {"instance_id": row["output_id"], "repo": row["source"], "tool_type": row["family"],
               "command": row["command"], "tool_output": row["tool_output"], "background_task": "", **WORKING_DEFAULTS}
    labels = {row["output_id"]: [label(row), label(row, query="is anything skipped", gold=[], difficulty="negative")]}
    out = file_label(working, labels)
    assert [r["instance_id"] for r in out] == [f"{row['output_id']}#0", f"{row['output_id']}#1"]
    assert json.loads(out[0]["spans"]) == [[3, 4]] and json.loads(out[1]["spans"]) == []
    assert json.loads(out[0]["notes"]) == {"pass": "A", "labeller": "A/test", "difficulty": "easy"}
    assert file_label(working, {})[0]["reject_reason"] == NO_LABEL
    stale = {row["output_id"]: [label(row, gold=[[30, 31]])]}
    assert file_label(working, stale)[0]["reject_reason"] == INVALID_LABEL


def test_an_output_gets_at_most_four_examples_per_pass(tmp_path):
    row = pool_row()
    path = tmp_path / "labels.jsonl"
    queries = ("which test fails", "what is skipped", "how long did it take", "Which plugin is loaded?",
               "Why was the run slow?")
    rows = [label(row, query=q) for q in queries]
    rows.append(label(row, query="which test fails", **{"pass": "B", "labeller": "B/test"}))
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    good, problems = check_label_files([path], {row["output_id"]: row})
    assert len(good) == 5 and [p.row for p in problems] == [5] and "at most 4" in problems[0].message


def test_a_revision_row_must_name_a_good_pass_a_example(tmp_path):
    row = pool_row()
    pool = {row["output_id"]: row}
    first = tmp_path / "batch-001.A.jsonl"
    first.write_text(json.dumps(label(row)) + "\n")
    widen = tmp_path / "widen-001.W.jsonl"
    rows = [label(row, query="Which test fails", gold=[[3, 6]], **{"pass": "W", "labeller": "W/test"}),
            label(row, query="what is skipped", gold=[[3, 6]], **{"pass": "W", "labeller": "W/test"})]
    widen.write_text("".join(json.dumps(r) + "\n" for r in rows))
    good, problems = check_label_files([first, widen], pool)
    assert [(r["pass"], r["gold"]) for r in good] == [("A", [[3, 4]]), ("W", [[3, 6]])]
    assert [(p.path, p.row) for p in problems] == [(str(widen), 2)] and "no good pass-A row" in problems[0].message
    alone, problems = check_label_files([widen], pool)  # checked alone, nothing to revise
    assert alone == [] and len(problems) == 2
    good, problems = check_label_files([widen], pool, reference=[label(row)])  # the A rows beside it
    assert len(good) == 1 and [p.row for p in problems] == [2]


def test_a_revision_replaces_the_pass_a_gold_and_keeps_the_example(tmp_path):
    from squeez_ray.label.file_teacher import FileTeacherConfig, load_labels

    row = pool_row()
    (tmp_path / "batch-001.A.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (
        label(row), label(row, query="what is skipped", gold=[[8, 8]]))))
    (tmp_path / "widen-001.W.jsonl").write_text(json.dumps(
        label(row, query="what is SKIPPED", gold=[[7, 9]], note="the block", **{"pass": "W", "labeller": "W/x"})) + "\n")
    labels = load_labels(FileTeacherConfig(labels=[str(tmp_path)]))
    working = {"instance_id": row["output_id"], "repo": row["source"], "tool_type": row["family"],
               "command": row["command"], "tool_output": row["tool_output"], "background_task": "", **WORKING_DEFAULTS}
    out = file_label(working, labels)
    assert [r["instance_id"] for r in out] == [f"{row['output_id']}#0", f"{row['output_id']}#1"]
    assert [json.loads(r["spans"]) for r in out] == [[[3, 4]], [[7, 9]]]
    assert out[1]["query"] == "what is skipped"
    assert json.loads(out[1]["notes"]) == {"pass": "A", "labeller": "A/test", "difficulty": "easy", "revised": "W/x"}
    assert "revised" not in json.loads(out[0]["notes"])


def test_ecosystem_collector_rows_are_pool_rows_and_short_outputs_are_dropped(tmp_path):
    from squeez_ray.collect.sources.ecosystems import Tree

    (tmp_path / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 8)))
    tree = Tree("npm:example", tmp_path, "MIT", "example 1.0")
    tree.run("read_file", ["cat", "-n", "a.txt"])
    tree.run("ls_find", ["ls", "a.txt"])  # one line: dropped, never padded
    assert len(tree.rows) == 1
    row = check_pool_row(tree.rows[0])
    assert row["tool_output"].split("\n")[0] == "     1\tline 1" and row["command"] == "cat -n a.txt"


def test_blind_sample_spreads_over_families_and_renders_its_queries():
    from squeez_ray.label.hand.batches import blind_sample
    from squeez_ray.label.hand.render import render_batch

    rows = [pool_row(output=OUTPUT + f"\nextra {i}", family=f) for i, f in enumerate(["lint"] * 5 + ["grep"] * 5)]
    pool = {r["output_id"]: r for r in rows}
    labels = [label(r, query=f"q{i}") for i, r in enumerate(rows)]
    chosen = blind_sample(labels, pool, 4, seed=1)
    assert sum(len(q) for q in chosen.values()) == 4
    assert sorted(pool[i]["family"] for i in chosen) == ["grep", "grep", "lint", "lint"]
    text = render_batch([pool[i] for i in chosen], queries=chosen)
    assert sum(line.startswith("QUERY TO ANSWER: ") for line in text.split("\n")) == 4
    second = render_batch([rows[0]], queries={rows[0]["output_id"]: ["q0"]}, second=True)
    assert "ALREADY ASKED: q0" in second and "QUERY TO ANSWER:" not in second


def test_label_job_reads_a_jsonl_pool_as_observations(tmp_path):
    from squeez_ray.label.job import _read_observations

    path = tmp_path / "pool.jsonl"
    path.write_text(json.dumps(pool_row()) + "\n")
    [obs] = _read_observations(str(path))
    assert obs["instance_id"] == pool_row()["output_id"] and obs["tool_type"] == "test_output"



def test_third_party_package_code_runs_in_the_collection_sandbox(monkeypatch, tmp_path):
    """What the pool runs over an unpacked package (its tests, its imports, reads of its files) goes
    through collect/sandbox.py: own HOME, none of the collector's environment, a deadline."""
    import sys

    from squeez_ray.collect.sources.python_pool import _run_third_party

    monkeypatch.setenv("SQUEEZ_TEST_SECRET", "hunter2")
    code, output = _run_third_party([sys.executable, "-c", "import os; print(os.environ['HOME']); "
                                     "print(os.environ.get('SQUEEZ_TEST_SECRET', 'unset')); raise SystemExit(3)"],
                                    tmp_path)
    home, secret = output.split()
    assert code == 3 and "squeez-home-" in home and secret == "unset"
    assert _run_third_party([sys.executable, "-c", "import time; time.sleep(30)"], tmp_path, timeout=0.5) == (None, "")


def test_the_pool_runs_every_package_command_through_the_sandbox(monkeypatch, tmp_path):
    from squeez_ray.collect import sandbox
    from squeez_ray.collect.sources import python_pool

    sandboxed, plain = [], []
    monkeypatch.setattr(sandbox, "run_sandboxed", lambda argv, cwd, **kw: sandboxed.append(argv[-1]) or
                        sandbox.RunResult(argv, 0, "", False, 0.0, None))
    monkeypatch.setattr(python_pool, "_run", lambda argv, cwd, timeout=120: plain.append(argv) or (None, ""))
    cache = tmp_path / "cache"
    (cache / "observations").mkdir(parents=True)
    (cache / "observations" / "tinypkg-1.0.json").write_text(json.dumps({"package": "tinypkg", "version": "1.0"}))
    src = cache / "src" / "tinypkg-1.0"
    (src / "tinypkg").mkdir(parents=True)
    (src / "tinypkg" / "__init__.py").write_text("")
    (src / "tests").mkdir()
    (src / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    python_pool.long_rows(cache)
    python_pool.extra_rows(cache)
    assert {"tests/test_x.py", ".", "tinypkg", "tests"} <= set(sandboxed)  # pytest, grep / find, mypy, the suite
    assert all(argv[1:3] == ["-m", "pip"] for argv in plain)  # only pip's resolver runs outside (needs the index)


def test_a_new_source_is_placed_by_hand_and_a_placed_one_never_moves():
    from squeez_ray.dataset.hand_merge import with_placements

    pinned = {"repo:pypi:six": "train"}
    assert with_placements(pinned, {"logs:vllm": "dev", "repo:logs:grpc": "dev", "pypi:six": "train"}) == {
        "repo:pypi:six": "train", "repo:logs:vllm": "dev", "repo:logs:grpc": "dev"}
    with pytest.raises(ValueError, match="never moves"):
        with_placements(pinned, {"pypi:six": "dev"})
    with pytest.raises(ValueError, match="must be one of"):
        with_placements(pinned, {"logs:vllm": "validation"})


@pytest.mark.parametrize("place, message", [(["pypi:sx=dev"], "no label row uses: pypi:sx"),
                                            (["logs:vllm"], "expected SOURCE=SPLIT"),
                                            (["pypi:six=holdout"], "must be one of")])
def test_merge_refuses_a_bad_placement_in_one_line_and_writes_nothing(tmp_path, capsys, place, message):
    from squeez_ray.dataset.hand_label import merge

    row = pool_row()
    write_pool([row], tmp_path / "pool.parquet")
    (tmp_path / "batch-001.A.jsonl").write_text(json.dumps(label(row)) + "\n")
    out = tmp_path / "out"
    assert merge([str(tmp_path / "pool.parquet")], [str(tmp_path / "batch-001.A.jsonl")], str(out), place=place) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and not out.exists()


def test_an_example_repeating_a_query_on_the_same_output_text_is_dropped_once():
    from squeez_ray.dataset.hand_merge import drop_repeated_examples

    rows = [{"instance_id": "a:1", "query": "where is parse defined", "tool_output": OUTPUT},
            {"instance_id": "a:2", "query": "where is parse defined ", "tool_output": OUTPUT},  # same text, other id
            {"instance_id": "a:3", "query": "where is parse used", "tool_output": OUTPUT},
            {"instance_id": "a:4", "query": "where is parse defined", "tool_output": OUTPUT + "\nmore"}]
    kept, dropped = drop_repeated_examples(rows)
    assert [r["instance_id"] for r in kept] == ["a:1", "a:3", "a:4"] and dropped == 1
