"""jobs/label.py with the rule teacher on a local Ray over real tool runs: parts, manifest, resume,
and a clear error for a bad observations file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from squeez_ray.collect.sources.scratch import make_project
from squeez_ray.collect.sources.source_tree import CallBudget, directory_tree, plan_calls, run_calls
from squeez_ray.label.job import LabelConfig, run_label
from squeez_ray.label.pipeline import TeacherConfig, label_rows_with_rules
from squeez_ray.schema import read_examples, write_observations

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def observations(tmp_path_factory):
    root = tmp_path_factory.mktemp("label-job")
    project = make_project(root, "quill", ["pricing", "text", "inventory", "settings"])
    tree = directory_tree(project, "scratch/quill", runs_code=True)
    rows, failures = run_calls(plan_calls(tree, CallBudget(), seed=0), workers=2)
    assert not failures and len(rows) > 20
    path = root / "observations.parquet"
    write_observations(rows, path)
    return path, rows


def test_rule_labelling_on_ray_matches_in_process_and_resumes(observations, ray_local, tmp_path):
    path, rows = observations
    config = LabelConfig(observations=str(path), output_dir=str(tmp_path / "out"), source="local", chunk_size=10,
                         teacher=TeacherConfig(engine="rules"))
    manifest = run_label(config)
    labelled = read_examples(tmp_path / "out" / "labelled")
    expected, dropped = label_rows_with_rules(rows)
    assert len(labelled) == len(expected) == manifest["counts"]["labelled"]
    assert manifest["dropped"] == dict(dropped)
    assert sorted((r["instance_id"], r["command"], r["query"]) for r in labelled) == \
        sorted((r["instance_id"], r["command"], r["query"]) for r in expected)
    assert len(list((tmp_path / "out" / "labelled").glob("part-*.parquet"))) == -(-len(rows) // 10)
    again = run_label(config)
    assert again["counts"]["to_label"] == 0 and again["counts"]["already_settled"] == len(rows)


@pytest.mark.no_cluster  # starts no Ray, Serve or vLLM: runs beside the cluster streams
def test_bad_observations_file_is_one_clear_error(tmp_path):
    bad = tmp_path / "obs.jsonl"
    bad.write_text('{"instance_id": "a", "tool_type": "grep", "command": "grep x", "tool_output": 3}\n')
    done = subprocess.run([sys.executable, "jobs/label.py", "--config", "jobs/configs/label.yaml",
                           f"observations={bad}", f"output_dir={tmp_path / 'out'}", "teacher.engine=rules"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "obs.jsonl: row 1 (instance_id 'a'): field 'tool_output': expected text" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_down_teacher_is_a_clear_error_and_nothing_is_settled(ray_local, tmp_path):
    """Once "done" with nothing labelled (exit 0); now LabelJobError: the runner prints it as one line, exit 2."""
    import socket

    from squeez_ray.label.engines import HttpTeacherConfig
    from squeez_ray.label.job import LabelJobError, _settled

    path = tmp_path / "obs.jsonl"
    path.write_text("".join(f'{{"instance_id": "i{n}", "tool_type": "grep", "command": "grep -rn x{n}", '
                            f'"tool_output": "a.py:1: x{n}\\na.py:2: y\\na.py:3: z"}}\n' for n in range(3)))
    with socket.socket() as probe:  # a loopback port nothing listens on once the block ends
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    out = tmp_path / "out"
    config = LabelConfig(observations=str(path), output_dir=str(out), teacher=TeacherConfig(
        engine="http", http=HttpTeacherConfig(url=url, max_retries=0)))
    with pytest.raises(LabelJobError, match="the teacher answered none of 3 request") as raised:
        run_label(config)
    assert url in str(raised.value) and "\n" not in str(raised.value)
    assert _settled(out)[0] == set()  # resume kept: the rerun asks for the same rows again
