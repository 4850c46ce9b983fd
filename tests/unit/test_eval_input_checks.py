"""`squeez eval` refuses what it cannot score honestly, and a file given as an output folder is a
clear exit 2, in `squeez eval` and the re-prune job alike (issue #15, item 6)."""

from __future__ import annotations

import json

import pytest

from squeez_ray.cli.eval import main


def _cases(tmp_path, rows):
    data = tmp_path / "cases.jsonl"
    data.write_text("".join(json.dumps({"tool": "grep", "output": "a\nb\nc", "gold": [[1, 1]], **row}) + "\n"
                            for row in rows))
    return data


@pytest.mark.parametrize("rows, row, words", [
    ([{"id": "a", "query": "q"}, {"id": "b", "query": "   "}], "row 2", "empty query"),
    ([{"id": "a", "query": "q"}, {"id": "b", "query": "q"}, {"id": "a", "query": "r"}], "row 3",
     "duplicate instance_id (first at"),
])
def test_blank_queries_and_duplicate_ids_exit_2_naming_file_and_row(tmp_path, capsys, rows, row, words):
    data = _cases(tmp_path, rows)
    assert main(["--data", str(data), "--system", "first", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert str(data) in err and row in err and words in err and "Traceback" not in err


def test_a_file_as_out_exits_2(public_cases_path, tmp_path, capsys):
    target = tmp_path / "a-file"
    target.write_text("")
    assert main(["--data", str(public_cases_path), "--system", "first", "--out", str(target)]) == 2
    assert "is a file" in capsys.readouterr().err


def test_a_file_as_reprune_output_is_refused(tmp_path):
    from squeez_ray.trajectories.pipeline import RepruneConfig
    from squeez_ray.trajectories.process import RepruneSettings

    (tmp_path / "runs").mkdir()
    (tmp_path / "out").write_text("")
    config = RepruneConfig(settings=RepruneSettings(input_dir=str(tmp_path / "runs"), output_dir=str(tmp_path / "out")))
    assert any("is a file" in p for p in config.validate())
