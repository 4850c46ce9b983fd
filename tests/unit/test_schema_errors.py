"""Bad input gives one DataError naming the file, the row and the field; writes are atomic."""

from __future__ import annotations

import json

import pytest

from squeez_ray.schema import DataError, read_examples, read_observations, write_examples

CASE = {"id": "c1", "tool": "grep", "query": "q", "output": "a\nb\nc", "gold": [[2, 2]]}


def jsonl(tmp_path, *rows, name="data.jsonl"):
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def error_of(path, **kwargs) -> DataError:
    with pytest.raises(DataError) as info:
        read_examples(path, **kwargs)
    assert str(path) in str(info.value)
    return info.value


def test_missing_file(tmp_path):
    assert "does not exist" in str(error_of(tmp_path / "nope.jsonl"))


@pytest.mark.parametrize("content", [b"", b"\n  \n"])
def test_empty_file(tmp_path, content):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(content)
    assert "no rows" in str(error_of(path))


def test_folder_without_data(tmp_path):
    (tmp_path / "d").mkdir()
    assert "neither" in str(error_of(tmp_path / "d"))


def test_unknown_suffix(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("id,tool\n")
    assert "unknown file type '.csv'" in str(error_of(path))


def test_truncated_jsonl_names_the_last_row(tmp_path):
    path = tmp_path / "cut.jsonl"
    path.write_text(json.dumps(CASE) + "\n" + json.dumps(CASE)[:25], encoding="utf-8")
    error = error_of(path)
    assert error.row == 2 and "truncated" in str(error)


def test_truncated_parquet(tmp_path):
    write_examples(read_examples(jsonl(tmp_path, CASE)), tmp_path / "rows.parquet")
    data = (tmp_path / "rows.parquet").read_bytes()
    (tmp_path / "rows.parquet").write_bytes(data[: len(data) // 2])
    assert "cannot read as Parquet" in str(error_of(tmp_path / "rows.parquet"))


def test_row_that_is_not_an_object(tmp_path):
    error = error_of(jsonl(tmp_path, CASE, "[1, 2]"))
    assert error.row == 2 and "expected an object" in str(error)


def test_unknown_columns_say_what_was_expected(tmp_path):
    error = error_of(jsonl(tmp_path, {"text": "x"}))
    assert "gold_spans" in str(error) and "prompt" in str(error) and error.row == 1


@pytest.mark.parametrize("field", ["query", "gold", "output", "id", "tool"])
def test_missing_column_names_row_and_field(tmp_path, field):
    broken = {k: v for k, v in CASE.items() if k != field}
    error = error_of(jsonl(tmp_path, CASE, broken), format="cases")
    assert (error.row, error.field) == (2, field)


@pytest.mark.parametrize("field,value,expected", [
    ("output", 42, "expected text, got int"),
    ("gold", "2-2", "expected a list of spans"),
    ("gold", [[2, "3"]], "pair of integers"),
    ("gold", [[True, 2]], "pair of integers"),
    ("query", ["q"], "expected text, got list"),
])
def test_wrong_types(tmp_path, field, value, expected):
    error = error_of(jsonl(tmp_path, {**CASE, field: value}))
    assert error.row == 1 and error.field == field and expected in str(error)  # named as the file spells it
    assert "'c1'" in str(error)


def test_wrong_boolean_in_canonical_row(tmp_path):
    row = {"instance_id": "i", "tool_type": "t", "query": "q", "tool_output": "a", "gold_spans": [],
           "is_irrelevant": "yes"}
    error = error_of(jsonl(tmp_path, row))
    assert error.field == "is_irrelevant" and "true or false" in str(error)


def test_non_utf8_bytes_in_tool_output(tmp_path):
    path = tmp_path / "bytes.jsonl"
    good = json.dumps(CASE).encode()
    bad = json.dumps({**CASE, "id": "c2", "output": "a\nb\nXX"}).encode().replace(b"XX", b"\xff\xfe")
    path.write_bytes(good + b"\n" + bad + b"\n")
    error = error_of(path)
    assert (error.row, error.field) == (2, "output") and "not valid UTF-8" in str(error) and "line 3" in str(error)


def test_escaped_lone_surrogate_is_rejected_too(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(CASE).replace('"a\\nb', '"\\ud800a\\nb') + "\n")
    assert error_of(path).field == "output"


def test_bad_observation_row(tmp_path):
    path = jsonl(tmp_path, {"instance_id": "i", "tool_type": "grep", "command": "grep x", "tool_output": "",
                            "exit_code": "0"}, name="obs.jsonl")
    with pytest.raises(DataError) as info:
        read_observations(path)
    assert (info.value.row, info.value.field) == (1, "exit_code")


def test_failed_write_leaves_the_existing_file_untouched(tmp_path):
    rows = read_examples(jsonl(tmp_path, CASE))
    target = tmp_path / "out.parquet"
    write_examples(rows, target)
    before = target.read_bytes()
    with pytest.raises(DataError) as info:
        write_examples(rows + [{**rows[0], "gold_spans": [[9, 9]]}], target)
    assert info.value.row == 2 and target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.jsonl", "out.parquet"]


def test_parquet_with_bytes_for_text_and_a_missing_column(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"id": ["c1"], "tool": ["grep"], "query": ["q"], "output": pa.array([b"a\xffb"], pa.binary()),
                      "gold": [[[1, 1]]]})
    pq.write_table(table, tmp_path / "bytes.parquet")
    error = error_of(tmp_path / "bytes.parquet")
    assert (error.row, error.field) == (1, "output") and "expected text, got bytes" in str(error)
    pq.write_table(table.drop_columns(["query"]).set_column(2, "output", pa.array(["a"])), tmp_path / "m.parquet")
    error = error_of(tmp_path / "m.parquet", format="cases")
    assert (error.row, error.field) == (1, "query")


def test_hub_id_without_the_hub_is_a_data_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # never reach the Hub from tests
    with pytest.raises(DataError, match="cannot load as a Hugging Face dataset"):
        read_examples("squeez-test-owner/no-such-dataset")
