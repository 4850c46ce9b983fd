"""Row functions of the labelling pipeline, driven by hand (no Ray, no engine)."""

from __future__ import annotations

import json

from squeez_ray.label import prompts, stages
from squeez_ray.label.pipeline import label_rows_with_rules

SETTINGS = stages.StageSettings(max_query_chars=100, max_output_lines=50)
OUTPUT = "\n".join(["collected 2 items", "", "tests/test_a.py F.", "E   assert 1 == 2", "1 failed, 1 passed"])


def observation(**fields):
    row = {"instance_id": "i", "repo": "o/r", "tool_type": "test_output", "command": "pytest -q",
           "tool_output": OUTPUT, "error": None, "problem_statement": "test_a fails"}
    row.update(fields)
    return row


def test_prepare_drops_before_any_request():
    assert stages.prepare(observation(error="timeout: killed after 60s"), SETTINGS)["reject_reason"] == \
        stages.OBSERVATION_ERROR
    assert stages.prepare(observation(tool_output="  \n"), SETTINGS)["reject_reason"] == stages.EMPTY_OUTPUT
    long = stages.prepare(observation(tool_output="x\n" * 60), SETTINGS)
    assert long["reject_reason"] == stages.OUTPUT_TOO_LONG and "61 > 50" in long["reject_detail"]
    ok = stages.prepare(observation(), SETTINGS)
    assert ok["reject_reason"] == "" and ok["background_task"] == "test_a fails"


def test_two_rounds_and_the_content_first_retry():
    row = stages.query_request(stages.prepare(observation(), SETTINGS), SETTINGS)
    messages = json.loads(row["teacher_request"])
    assert messages[0]["content"] == prompts.QUERY_SYSTEM and "test_a fails" in messages[1]["content"]
    row = stages.take_query({**row, "teacher_reply": '{"query": "Which assertion fails?"}'}, SETTINGS)
    assert row["query"] == "Which assertion fails?" and not row["reject_reason"]
    row = stages.spans_request(row)
    numbered = json.loads(row["teacher_request"])[1]["content"]
    assert "4: E   assert 1 == 2" in numbered
    row = stages.take_spans({**row, "teacher_reply": '{"spans": []}'})
    assert stages.needs_retry(row)
    retry = stages.spans_request(stages.clear_rejection(row), retry=True)
    user = json.loads(retry["teacher_request"])[1]["content"]
    assert user.index("E   assert") < user.index("Query: Which assertion fails?")  # output first
    done = stages.take_spans({**retry, "teacher_reply": '{"spans": [[4, 4]]}'})
    assert not stages.needs_retry(done) and json.loads(done["spans"]) == [[4, 4]]
    example = stages.to_example(done, "swe")
    assert example["gold_spans"] == [{"start_line": 4, "end_line": 4}] and not example["is_irrelevant"]
    failed = stages.take_spans({**retry, "teacher_reply": '{"spans": []}'})
    assert failed["reject_reason"] == "empty_spans" and not stages.needs_retry(failed)


def test_transport_errors_become_the_rejection():
    row = stages.query_request(stages.prepare(observation(), SETTINGS), SETTINGS)
    failed = stages.take_query({**row, "teacher_error": "retries_exhausted", "teacher_error_detail": "HTTP 503"},
                               SETTINGS)
    assert (failed["reject_reason"], failed["reject_detail"]) == ("retries_exhausted", "HTTP 503")


def test_rule_teacher_in_process_counts_drops():
    rows, dropped = label_rows_with_rules([observation(tool_type="curl"), observation(tool_output="")])
    assert rows == [] and dropped == {"no_rule": 1, "empty_output": 1}
