"""The rule teacher on REAL tool outputs: pytest, python tracebacks, git, grep, ruff, pip over a real
scratch project (a git repository made in tmp_path), run through the collection sandbox."""

from __future__ import annotations

import re

import pytest

from squeez_ray.collect.tools import run_tool
from squeez_ray.collect.sources.scratch import make_project
from squeez_ray.label.parse import Rejection
from squeez_ray.label.rules import NO_RULE, NOTHING_FOUND, RuleLabel, label_with_rules
from squeez_ray.spans import kept_text, split_lines


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return make_project(tmp_path_factory.mktemp("scratch"), "ledger", ["pricing", "text", "settings", "geometry"])


def observe(project, tool_type, args, task=""):
    observation = run_tool(tool_type, args, project, timeout_s=120)
    assert observation["error"] is None, observation
    return {"instance_id": "scratch/ledger", "background_task": task, **observation}


def kept(observation, label):
    return kept_text(split_lines(observation["tool_output"]), label.spans)


def test_pytest_failure_block(project):
    obs = observe(project, "test_output", {"tests": ["tests/test_pricing.py"]})
    label = label_with_rules(obs)
    assert isinstance(label, RuleLabel)
    text = kept(obs, label)
    failing = {"test_zero_rate": "KeyError", "test_discount_rounding": "assert"}
    name = next(n for n in failing if n in label.query)
    assert name in text.split("\n")[0]  # the block starts at the test's section header
    assert failing[name] in text and "E  " in text
    assert "passed" not in text  # the summary line is not evidence


def test_task_mention_picks_the_failing_test(project):
    obs = observe(project, "test_output", {"tests": ["tests/test_pricing.py"]},
                  task="test_discount_rounding fails after the rounding change")
    label = label_with_rules(obs)
    assert "test_discount_rounding" in label.query and "16.99" in kept(obs, label)


def test_python_traceback_keeps_exception_and_raising_frame(project):
    obs = observe(project, "python", {"module": "ledger.settings"})
    label = label_with_rules(obs)
    text = kept(obs, label)
    assert "ValueError" in label.query
    assert "ValueError: invalid literal for int() with base 10: '30s'" in text
    assert "settings.py" in text  # the project frame that raised, not only the stdlib one
    assert "Traceback (most recent call last)" not in text


def test_git_log_commit_block(project):
    obs = observe(project, "git_log", {"max_count": 12})
    label = label_with_rules(obs)
    lines = kept(obs, label).split("\n")
    assert lines[0].startswith("commit ")
    subject = label.query.split('"')[1]
    assert any(line.strip() == subject for line in lines)
    assert sum(line.startswith("commit ") for line in lines) == 1


def test_grep_hits_that_define_the_symbol(project):
    obs = observe(project, "grep", {"pattern": "net_to_gross", "path": "."})
    label = label_with_rules(obs)
    assert "net_to_gross" in label.query
    assert kept(obs, label) == "./ledger/pricing.py:7:def net_to_gross(net: float, rate: str = \"standard\") -> float:"


def test_read_file_definition_block(project):
    obs = observe(project, "read_file", {"path": "ledger/geometry.py"}, task="centroid divides by zero")
    label = label_with_rules(obs)
    text = kept(obs, label)
    assert "centroid" in label.query
    assert "def centroid" in text and "6 * a" in text and "def distance" not in text


def test_lint_findings_of_one_rule(project):
    obs = observe(project, "lint_output", {"path": "ledger/text.py"})
    label = label_with_rules(obs)
    code = re.search(r"\b[A-Z]{1,4}\d{2,4}\b", label.query).group(0)
    text = kept(obs, label)
    assert text.startswith(code) and "text.py" in text
    others = [line for line in split_lines(obs["tool_output"]) if re.match(r"[A-Z]{1,4}\d{2,4} ", line)
              and not line.startswith(code)]
    assert not any(line in text.split("\n") for line in others)  # findings of other rules stay out


def test_git_diff_hunk_and_blame(project):
    diff = observe(project, "git_diff", {"base": "HEAD~4", "head": "HEAD"})
    label = label_with_rules(diff)
    text = kept(diff, label)
    assert text.startswith("@@ ") and any(line.startswith(("+", "-")) for line in text.split("\n")[1:])
    blame = observe(project, "git_blame", {"path": "ledger/pricing.py"})
    label = label_with_rules(blame)
    name = re.search(r"(?:defines|definition of) (\w+)", label.query).group(1)
    line = kept(blame, label)
    assert "\n" not in line and re.search(rf"(def|class) {name}\b|^.*\) {name}\s*=", line), line


def test_pip_failure_lines(project):
    obs = observe(project, "pip_install", {"target": "ledger-core==2.0"})
    label = label_with_rules(obs)
    assert kept(obs, label).startswith("ERROR: ")


def test_rejections_name_the_reason():
    assert label_with_rules({"tool_type": "curl", "tool_output": "HTTP/1.1 200 OK"}).reason == NO_RULE
    nothing = label_with_rules({"tool_type": "test_output", "tool_output": "....\n4 passed in 0.01s"})
    assert isinstance(nothing, Rejection) and nothing.reason == NOTHING_FOUND


def test_labels_are_deterministic(project):
    obs = observe(project, "read_file", {"path": "ledger/pricing.py"})
    assert label_with_rules(obs) == label_with_rules(dict(obs))
