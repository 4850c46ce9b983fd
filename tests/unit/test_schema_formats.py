"""Data contracts: span normalisation, importers and exporters, round trips (schema package)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from squeez_ray.prompt import DEFAULT_SYSTEM_PROMPT
from squeez_ray.schema import (LABELLED_SCHEMA, OBSERVATION_SCHEMA, DataError, check_example, read_examples,
                               read_observations, write_examples, write_observations)

OUTPUT = "\n".join(["def f():", "    x = 1", "    return x", "", "def g():", "    return 2", "}", "}"])


def example(**overrides):
    row = {"instance_id": "ex-1", "source": "swe", "tool_type": "read_file", "query": "where is g",
           "background_task": "fix g", "tool_output": OUTPUT,
           "gold_spans": [{"start_line": 5, "end_line": 6}], "is_irrelevant": False, "command": "cat a.py",
           "repo": "o/r", "split": "test", "split_group_id": "o/r", "notes": None}
    row.update(overrides)
    return row


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_spans_are_sorted_and_merged_when_overlapping_or_touching():
    row = check_example(example(gold_spans=[[5, 6], [1, 2], [2, 3], [7, 7]]))
    assert row["gold_spans"] == [{"start_line": 1, "end_line": 3}, {"start_line": 5, "end_line": 7}]


def test_out_of_range_span_names_the_example(tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", [example(), example(instance_id="ex-2", gold_spans=[[8, 9]])])
    with pytest.raises(DataError) as info:
        read_examples(path)
    message = str(info.value)
    assert str(path) in message and "row 2" in message and "'ex-2'" in message and "gold_spans" in message
    assert "out of range" in message and info.value.row == 2 and info.value.field == "gold_spans"


def test_negative_gets_is_irrelevant_and_a_contradiction_is_an_error():
    assert check_example(example(gold_spans=[], is_irrelevant=None))["is_irrelevant"] is True
    with pytest.raises(DataError, match="is_irrelevant"):
        check_example(example(is_irrelevant=True))


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_canonical_round_trip(tmp_path, suffix):
    rows = [example(), example(instance_id="ex-2", gold_spans=[], is_irrelevant=True, background_task=None)]
    path = tmp_path / f"rows{suffix}"
    assert write_examples(rows, path) == 2
    assert read_examples(path) == [check_example(r) for r in rows]


def test_parquet_has_the_explicit_arrow_schema(tmp_path):
    write_examples([example()], tmp_path / "rows.parquet")
    assert pq.read_schema(tmp_path / "rows.parquet").equals(LABELLED_SCHEMA, check_metadata=False)


def test_public_cases_import_and_export_byte_for_byte(public_cases_path, tmp_path):
    rows = read_examples(public_cases_path)
    assert len(rows) == 67
    first = rows[0]
    assert first["instance_id"] == "pub-001" and first["source"] == "public_cases"
    assert first["tool_type"] == "read_file" and first["is_irrelevant"] is False
    assert first["gold_spans"] == [{"start_line": 196, "end_line": 196}, {"start_line": 201, "end_line": 207}]
    assert sum(r["is_irrelevant"] for r in rows) == sum(1 for r in rows if not r["gold_spans"]) > 0
    write_examples(rows, tmp_path / "cases.jsonl", format="cases")
    assert (tmp_path / "cases.jsonl").read_text(encoding="utf-8").splitlines() == [
        json.dumps(json.loads(line), ensure_ascii=False)
        for line in public_cases_path.read_text(encoding="utf-8").splitlines()]


def test_squeez_export_and_import_round_trip(tmp_path):
    # The gold block is the second "}" of two: recovery in order must not pick the first one.
    rows = [example(gold_spans=[[2, 2], [8, 8]]), example(instance_id="neg", gold_spans=[], background_task=None)]
    path = tmp_path / "sft.jsonl"
    write_examples(rows, path, format="squeez")
    written = [json.loads(line) for line in path.read_text().splitlines()]
    assert written[0]["prompt"].startswith(f"<|im_start|>system\n{DEFAULT_SYSTEM_PROMPT}<|im_end|>")
    assert written[0]["response"] == "<relevant_lines>\n    x = 1\n}\n</relevant_lines>"
    assert written[1]["response"] == "<relevant_lines>\n</relevant_lines>"
    assert read_examples(path) == [check_example(r) for r in rows]


def released_row(response: str, output: str = OUTPUT, **metadata):
    prompt = ("<|im_start|>system\nYou prune verbose tool output. Use <query> and <tool_output>.<|im_end|>\n"
              f"<|im_start|>user\n<query>\nwhere is g\n</query>\n<background_task>\nfix g\n</background_task>\n"
              f"<tool_output>\n{output}\n</tool_output><|im_end|>\n<|im_start|>assistant\n")
    return {"prompt": prompt, "response": response,
            "metadata": {"instance_id": "django__django-1", "tool_type": "read_file", "source": "swe", **metadata}}


def test_released_xml_and_legacy_json_targets_recover_spans(tmp_path):
    xml = released_row("<relevant_lines>\ndef g():\n    return 2\n}\n</relevant_lines>")
    legacy = released_row(json.dumps({"relevant_lines": ["    x = 1", "    return x"]}))
    old_task = {"prompt": f"<|im_start|>user\n<task>\nfix f\n</task>\n<tool_output>\n{OUTPUT}\n</tool_output>",
                "response": "<relevant_lines>\n</relevant_lines>"}
    rows = read_examples(write_jsonl(tmp_path / "released.jsonl", [xml, legacy, old_task]))
    assert rows[0]["gold_spans"] == [{"start_line": 5, "end_line": 7}]
    assert rows[0]["query"] == "where is g" and rows[0]["background_task"] == "fix g"
    assert rows[0]["tool_output"] == OUTPUT and rows[0]["instance_id"] == "django__django-1"
    assert rows[1]["gold_spans"] == [{"start_line": 2, "end_line": 3}]
    assert rows[2]["query"] == "fix f" and rows[2]["is_irrelevant"] is True and rows[2]["source"] == "squeez"


def test_target_line_not_in_the_output_is_an_error(tmp_path):
    bad = released_row("<relevant_lines>\n2: def g():\n</relevant_lines>")
    with pytest.raises(DataError) as info:
        read_examples(write_jsonl(tmp_path / "released.jsonl", [bad]))
    assert info.value.field == "response" and "2: def g():" in str(info.value)


def test_out_of_order_target_is_an_error(tmp_path):
    bad = released_row("<relevant_lines>\ndef g():\ndef f():\n</relevant_lines>")
    with pytest.raises(DataError, match="in order"):
        read_examples(write_jsonl(tmp_path / "released.jsonl", [bad]))


def test_hf_save_to_disk_and_parquet_folder_round_trip(tmp_path):
    import datasets

    rows = [example(), example(instance_id="ex-2", gold_spans=[[1, 1]])]
    write_examples(rows, tmp_path / "saved", format="hf")
    assert read_examples(tmp_path / "saved") == [check_example(r) for r in rows]
    # A DatasetDict with several splits needs a split; a dataset's own Parquet export reads as is.
    dd = datasets.DatasetDict({"train": datasets.load_from_disk(str(tmp_path / "saved")),
                               "test": datasets.load_from_disk(str(tmp_path / "saved")).select([1])})
    dd.save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(DataError, match="splits"):
        read_examples(tmp_path / "dd")
    assert [r["instance_id"] for r in read_examples(tmp_path / "dd", split="test")] == ["ex-2"]
    (tmp_path / "pq").mkdir()
    dd["train"].to_parquet(str(tmp_path / "pq" / "train-0.parquet"))
    assert read_examples(tmp_path / "pq") == [check_example(r) for r in rows]


def test_observations_round_trip_and_argv_is_shell_quoted(tmp_path):
    rows = [{"instance_id": "i1", "repo": "o/r", "base_commit": "abc", "tool_type": "grep",
             "command": ["grep", "-rn", "it's", "src/"], "exit_code": 0, "duration_s": 0.5,
             "tool_output": "src/a.py:1:it's", "truncated": False, "error": None},
            {"instance_id": "i2", "tool_type": "test_output", "command": "pytest -q", "tool_output": ""}]
    for suffix in (".parquet", ".jsonl"):
        path = tmp_path / f"obs{suffix}"
        write_observations(rows, path)
        back = read_observations(path)
        assert shlex.split(back[0]["command"]) == ["grep", "-rn", "it's", "src/"]
        assert back[1] == {"instance_id": "i2", "repo": None, "base_commit": None, "tool_type": "test_output",
                           "command": "pytest -q", "exit_code": None, "duration_s": None, "tool_output": "",
                           "truncated": False, "error": None}
    assert pq.read_schema(tmp_path / "obs.parquet").equals(OBSERVATION_SCHEMA, check_metadata=False)


def test_released_rows_without_spans_take_the_earliest_match_in_order(tmp_path):
    # Text alone cannot say which of two equal lines was meant; the first one after the previous
    # target line is taken (documented), and our own exports avoid the question via metadata spans.
    row = released_row("<relevant_lines>\n    return 2\n}\n</relevant_lines>")
    assert read_examples(write_jsonl(tmp_path / "r.jsonl", [row]))[0]["gold_spans"] == [
        {"start_line": 6, "end_line": 7}]


def test_metadata_spans_that_contradict_the_response_are_an_error(tmp_path):
    row = released_row("<relevant_lines>\ndef g():\n</relevant_lines>", gold_spans=[{"start_line": 1, "end_line": 1}])
    with pytest.raises(DataError) as info:
        read_examples(write_jsonl(tmp_path / "r.jsonl", [row]))
    assert info.value.field == "metadata.gold_spans" and "'django__django-1'" in str(info.value)
