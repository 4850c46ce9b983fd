"""``squeez eval`` / ``jobs/evaluate.py`` end to end on the public cases with the four baselines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from squeez_ray.cli import main as squeez_main
from squeez_ray.cli.eval import main
from squeez_ray.metrics import REQUIRED_KEYS
from squeez_ray.evaluate.local import score_row
from squeez_ray.infer.base import make_result

REPO = Path(__file__).resolve().parents[2]
SYSTEMS = ["--system", "bm25", "--system", "first", "--system", "last", "--system", "random"]
# METRICS.md section 4: (recall, F1) a straightforward implementation gets on the public cases.
EXPECTED = {"bm25": (0.44, 0.21), "first": (0.06, 0.12), "last": (0.08, 0.12), "random": (0.10, 0.16)}


@pytest.fixture(scope="module")
def baseline_run(public_cases_path, tmp_path_factory):
    out = tmp_path_factory.mktemp("eval")
    assert main(["--data", str(public_cases_path), *SYSTEMS, "--out", str(out)]) == 0
    return out


def test_metrics_json_has_the_contract_shape(baseline_run):
    metrics = json.loads((baseline_run / "metrics.json").read_text())
    assert list(metrics["systems"]) == ["bm25", "first", "last", "random"]
    for system in metrics["systems"].values():
        assert set(REQUIRED_KEYS) <= set(system["overall"]) and system["overall"]["n"] == 67
        assert {"line_f1", "char_compression", "token_compression", "span_recall", "latency_ms",
                "input_tokens", "output_tokens"} <= set(system["overall"])
        assert set(system["by_tool"]) >= {"read_file", "grep", "git_log", "test_output"}
        assert sum(t["n"] for t in system["by_tool"].values()) == 67
        for tool in system["by_tool"].values():
            assert set(REQUIRED_KEYS) <= set(tool)
    assert metrics["token_counter"].startswith("characters / 4")


def test_baselines_land_near_the_published_numbers(baseline_run):
    systems = json.loads((baseline_run / "metrics.json").read_text())["systems"]
    for name, (recall, f1) in EXPECTED.items():
        overall = systems[name]["overall"]
        assert overall["recall"] == pytest.approx(recall, abs=0.03), name
        assert overall["f1"] == pytest.approx(f1, abs=0.03), name
        assert overall["compression"] == pytest.approx(0.90, abs=0.01)
        assert overall["negatives_empty"] == 0.0  # baselines never answer empty
    assert systems["bm25"]["overall"]["gold_compression"] == pytest.approx(0.96, abs=0.01)


def test_per_example_rows_report_and_plot(baseline_run):
    table = pq.read_table(baseline_run / "per_example.parquet")
    assert table.num_rows == 4 * 67
    assert {"system", "instance_id", "tool_type", "f1", "line_f1", "span_recall", "latency_ms",
            "pred_spans"} <= set(table.column_names)
    report = (baseline_run / "report.md").read_text()
    assert "| bm25 |" in report and "### read_file" in report and "characters / 4" in report
    assert (baseline_run / "recall_vs_compression.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    manifest = json.loads((baseline_run / "manifest.json").read_text())
    assert manifest["counts"] == {"examples": 67, "negatives": 8, "systems": 4, "rows": 268}


def test_resume_reuses_scored_systems_only_for_the_same_examples(public_cases_path, tmp_path):
    args = ["--data", str(public_cases_path), "--system", "first", "--out", str(tmp_path)]
    assert main([*args, "--limit", "5"]) == 0
    first_metrics = (tmp_path / "metrics.json").read_text()
    assert main([*args, "--limit", "5"]) == 0
    assert json.loads((tmp_path / "manifest.json").read_text())["resumed_systems"] == ["first"]
    assert (tmp_path / "metrics.json").read_text() == first_metrics
    assert main([*args, "--limit", "6"]) == 0
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["resumed_systems"] == [] and manifest["counts"]["examples"] == 6


def test_squeez_command_dispatches_eval_and_labels_systems(public_cases_path, tmp_path, capsys):
    rc = squeez_main(["eval", "--data", str(public_cases_path), "--system", "random=rand-3", "--seed", "3",
                      "--system", "random", "--limit", "4", "--out", str(tmp_path)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "rand-3" in printed and "overall (4 examples" in printed
    systems = json.loads((tmp_path / "metrics.json").read_text())["systems"]
    assert set(systems) == {"rand-3", "random"}


def test_bad_data_exits_2_naming_file_row_and_field(tmp_path, capsys):
    data = tmp_path / "cases.jsonl"
    data.write_text(json.dumps({"id": "a", "tool": "grep", "query": "q", "output": "x", "gold": [[1, 5]]}) + "\n")
    assert main(["--data", str(data), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert str(data) in err and "row 1" in err and "field 'gold'" in err and "Traceback" not in err
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_unknown_system_exits_2(public_cases_path, tmp_path, capsys):
    assert main(["--data", str(public_cases_path), "--system", "bm26", "--out", str(tmp_path)]) == 2
    assert "unknown system 'bm26'" in capsys.readouterr().err


def test_duplicate_labels_exit_2(public_cases_path, tmp_path, capsys):
    assert main(["--data", str(public_cases_path), "--system", "first", "--system", "first",
                 "--out", str(tmp_path)]) == 2
    assert "NAME=LABEL" in capsys.readouterr().err


def test_job_script_in_a_real_process_prints_no_traceback(tmp_path):
    data = tmp_path / "empty.jsonl"
    data.write_bytes(b"")
    proc = subprocess.run([sys.executable, str(REPO / "jobs" / "evaluate.py"), "--data", str(data),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no rows" in proc.stderr and "Traceback" not in proc.stderr


def test_score_row_is_the_same_for_a_result_and_its_dict():
    example = {"instance_id": "e", "tool_type": "grep", "source": "s", "tool_output": "a\nb\nc",
               "gold_spans": [{"start_line": 2, "end_line": 2}]}
    result = make_result("a\nb\nc", [(2, 3)], model="m")
    from_object = score_row(example, result, system="x", example_index=0)
    from_dict = score_row(example, json.loads(json.dumps(result.to_dict())), system="x", example_index=0)
    assert from_object == from_dict
    assert from_object["recall"] == 1.0 and from_object["precision"] == 0.5 and from_object["tool_type"] == "grep"
    assert from_object["pred_spans"] == [[2, 3]]


def test_a_system_may_name_its_own_checkpoint():
    from squeez_ray.infer.registry import BackendOptions
    from squeez_ray.evaluate.local import SystemSpec

    spec = SystemSpec.parse("encoder=encoder-v2@runs/encoder/v2")
    assert (spec.backend, spec.label, spec.model) == ("encoder", "encoder-v2", "runs/encoder/v2")
    assert spec.options(BackendOptions(model="other")).model == "runs/encoder/v2"
    plain = SystemSpec.parse("encoder")
    assert plain.label == "encoder" and plain.model is None
    assert plain.options(BackendOptions(model="shared")).model == "shared"
