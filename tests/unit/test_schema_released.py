"""The released data's three formats through one import that skips and reports bad rows (small
hand-made files): encoder rows with positions recovered in order and ambiguity counted, Squeez
prompt/response rows, canonical rows; strict mode stops at the first bad row instead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from squeez_ray.schema import DataError, import_examples, read_examples, write_examples

OUTPUT = "\n".join(["collected 4 items", "test_a PASSED", "}", "test_b FAILED", "}", "E  assert 1 == 2", "done"])


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def encoder_row(**overrides):
    row = {"id": "e1", "task": "why did test_b fail", "tool_output": OUTPUT,
           "relevant_lines": ["test_b FAILED", "E  assert 1 == 2"]}
    row.update(overrides)
    return row


def test_encoder_rows_recover_positions_in_order(tmp_path):
    path = write_jsonl(tmp_path / "enc.jsonl", [
        encoder_row(),
        encoder_row(id="e2", relevant_lines=[]),  # a negative
        encoder_row(id="e3", relevant_lines="test_a PASSED\ntest_b FAILED"),  # one text block
    ])
    rows, summary = import_examples(path)
    assert [r["gold_spans"] for r in rows] == [
        [{"start_line": 4, "end_line": 4}, {"start_line": 6, "end_line": 6}], [],
        [{"start_line": 2, "end_line": 2}, {"start_line": 4, "end_line": 4}]]
    assert rows[0]["query"] == "why did test_b fail" and rows[0]["instance_id"] == "e1"
    assert rows[1]["is_irrelevant"] is True
    assert (summary.read, summary.imported, summary.skipped, summary.ambiguous_rows) == (3, 3, 0, 0)
    assert summary.formats == {"encoder": 3}
    assert read_examples(path) == rows  # the strict reader agrees on good files


def test_repeated_lines_are_placed_earliest_and_counted_ambiguous(tmp_path):
    path = write_jsonl(tmp_path / "enc.jsonl", [
        encoder_row(id="one-brace", relevant_lines=["}"]),  # lines 3 and 5: either fits
        encoder_row(id="pinned", relevant_lines=["test_b FAILED", "}"]),  # only line 5 comes after line 4
        encoder_row(id="two-braces", relevant_lines=["}", "}"]),  # 3 and 5: the only in-order placement
    ])
    rows, summary = import_examples(path)
    spans = {r["instance_id"]: [(s["start_line"], s["end_line"]) for s in r["gold_spans"]] for r in rows}
    assert spans == {"one-brace": [(3, 3)], "pinned": [(4, 5)], "two-braces": [(3, 3), (5, 5)]}
    assert (summary.ambiguous_rows, summary.ambiguous_lines) == (1, 1)


def test_bad_rows_are_reported_and_skipped_or_stop_in_strict_mode(tmp_path):
    path = write_jsonl(tmp_path / "enc.jsonl", [
        encoder_row(),
        encoder_row(id="invented", relevant_lines=["a line the output never printed"]),
        encoder_row(id="out-of-order", relevant_lines=["E  assert 1 == 2", "test_b FAILED"]),
        encoder_row(id="no-task", task=None),
        encoder_row(id="bad-type", relevant_lines=[1, 2]),
        encoder_row(id="last"),
    ])
    rows, summary = import_examples(path)
    assert [r["instance_id"] for r in rows] == ["e1", "last"]
    assert (summary.read, summary.imported, summary.skipped) == (6, 2, 4)
    assert [(e["row"], e["field"]) for e in summary.errors] == [
        (2, "relevant_lines"), (3, "relevant_lines"), (4, "task"), (5, "relevant_lines")]
    assert all(e["file"] == str(path) for e in summary.errors)
    assert "is not a line of the tool output" in summary.errors[0]["message"]
    with pytest.raises(DataError) as stopped:
        import_examples(path, strict=True)
    assert (stopped.value.row, stopped.value.field) == (2, "relevant_lines") and str(path) in str(stopped.value)


def test_all_three_released_formats_in_one_folder_of_files(tmp_path, golden_rows):
    encoder = write_jsonl(tmp_path / "encoder.jsonl", [encoder_row(), encoder_row(id="bad", tool_output=7)])
    sft = write_jsonl(tmp_path / "sft.jsonl", [
        {"prompt": r["prompt"], "response": r["response"]} for r in golden_rows] + [
        {"prompt": golden_rows[0]["prompt"], "response": "<relevant_lines>\nnot in the output\n</relevant_lines>"}])
    canonical = tmp_path / "canonical.jsonl"
    write_examples(read_examples(write_jsonl(tmp_path / "good.jsonl", [encoder_row()])), canonical)
    counts = {}
    for path in (encoder, sft, canonical):
        rows, summary = import_examples(path)
        counts[path.stem] = (summary.imported, summary.skipped, dict(summary.formats))
    assert counts == {"encoder": (1, 1, {"encoder": 1}), "sft": (2, 1, {"squeez": 2}),
                      "canonical": (1, 0, {"canonical": 1})}
    rows, _ = import_examples(sft)
    assert rows[0]["query"] == golden_rows[0]["query"] and rows[1]["gold_spans"] == []


def test_encoder_rows_export_and_import_round_trip(tmp_path):
    rows, _ = import_examples(write_jsonl(tmp_path / "in.jsonl", [encoder_row(), encoder_row(id="neg", relevant_lines=[])]))
    out = tmp_path / "out.jsonl"
    write_examples(rows, out, format="encoder")
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert written[0]["relevant_lines"] == ["test_b FAILED", "E  assert 1 == 2"] and written[1]["relevant_lines"] == []
    assert import_examples(out)[0] == rows


def test_import_job_writes_rows_and_summary_and_strict_stops(tmp_path):
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    source = write_jsonl(tmp_path / "enc.jsonl", [encoder_row(), encoder_row(id="bad", relevant_lines=["nope"])])
    before = source.read_bytes()
    out = tmp_path / "out" / "rows.parquet"
    done = subprocess.run([sys.executable, str(repo / "jobs" / "import_data.py"), str(source), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    summary = json.loads(Path(str(out) + ".summary.json").read_text())
    assert (summary["read"], summary["imported"], summary["skipped"]) == (2, 1, 1)
    assert summary["errors"][0]["row"] == 2 and summary["errors"][0]["field"] == "relevant_lines"
    assert f"{source}: row 2" in done.stderr and [r["instance_id"] for r in read_examples(out)] == ["e1"]
    assert source.read_bytes() == before
    strict = subprocess.run([sys.executable, str(repo / "jobs" / "import_data.py"), str(source), "--out",
                             str(tmp_path / "strict.parquet"), "--strict"], capture_output=True, text=True, timeout=120)
    assert strict.returncode == 2 and "row 2" in strict.stderr and "Traceback" not in strict.stderr
    assert not (tmp_path / "strict.parquet").exists()


def test_both_readers_read_each_file_of_a_folder_in_its_own_shape(tmp_path):
    """read_examples and import_examples share one loop over a source's files (schema.files.rows_by_file):
    each file's shape is told from its own columns, a cases file's rows are named after the file, and
    on good files the two readers give the same rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "released"
    folder.mkdir()
    pq.write_table(pa.Table.from_pylist([encoder_row()]), folder / "a_encoder.parquet")
    case = {"id": "c1", "tool": "pytest", "query": "why did test_b fail", "output": OUTPUT, "gold": [[4, 4]]}
    pq.write_table(pa.Table.from_pylist([case]), folder / "b_public.parquet")
    rows, summary = import_examples(folder)
    assert summary.formats == {"encoder": 1, "cases": 1} and summary.skipped == 0
    assert [r["instance_id"] for r in rows] == ["e1", "c1"] and rows[1]["source"] == "b_public"
    assert read_examples(folder) == rows
