"""The rule teacher: labels structured tool outputs without an LLM, for bootstrapping and tests.

Each rule finds one well-defined piece of evidence in one tool type's output (the failure block of
a test, the raising frame of a traceback, a commit, a definition, a set of grep hits, ...) and
writes a query from a per-tool template that names what it found. Choices among candidates are
deterministic (hashed from the observation), and prefer candidates the task text mentions, so a
rerun labels the same rows the same way.

``label_with_rules(observation)`` returns a :class:`RuleLabel` or a ``parse.Rejection`` whose
reason says why the output could not be labelled (``no_rule`` for a tool type without a rule,
``nothing_found`` when the output lacks the structure the rule needs).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from squeez_ray.label import rules_code, rules_logs
from squeez_ray.label.parse import Rejection
from squeez_ray.label.rule_base import Found, Obs
from squeez_ray.spans import Span, normalize_spans, split_lines

NO_RULE = "no_rule"
NOTHING_FOUND = "nothing_found"

# Tool-type spellings other sources use, mapped to the collection executors' names.
TOOL_ALIASES = {"lint": "lint_output", "ls_find": "ls", "python_traceback": "python", "find": "ls"}


@dataclass(frozen=True)
class RuleLabel:
    query: str
    spans: list[Span]
    rule: str  # which rule fired (kept for statistics and debugging)


def _argv(command: Any) -> list[str]:
    if isinstance(command, (list, tuple)):
        return [str(a) for a in command]
    try:
        return shlex.split(command or "")
    except ValueError:
        return (command or "").split()


def label_with_rules(observation: Mapping[str, Any]) -> RuleLabel | Rejection:
    tool_type = TOOL_ALIASES.get(observation.get("tool_type") or "", observation.get("tool_type") or "")
    rule = RULES.get(tool_type)
    if rule is None:
        return Rejection(NO_RULE, f"no rule for tool_type {tool_type!r}")
    output = observation.get("tool_output") or ""
    lines = split_lines(output)
    obs = Obs(lines, _argv(observation.get("command")),
              observation.get("background_task") or observation.get("problem_statement") or "",
              f"{observation.get('instance_id')}|{observation.get('command')}")
    found = rule(obs)
    if found is None:
        return Rejection(NOTHING_FOUND, f"{tool_type}: the output has nothing this rule labels")
    query, spans = found
    return RuleLabel(query, normalize_spans(spans, len(lines)), f"{tool_type}")


RULES: dict[str, Callable[[Obs], Found]] = {
    "test_output": rules_logs.test_failure,
    "python": rules_logs.python_traceback,
    "pip_install": rules_logs.pip_failure,
    "build_output": rules_logs.build_failure,
    "lint_output": rules_logs.lint_findings,
    "type_check": rules_logs.type_errors,
    "coverage": rules_logs.coverage_gaps,
    "git_log": rules_code.git_commit,
    "git_blame": rules_code.git_blame_line,
    "git_diff": rules_code.git_diff_hunk,
    "read_file": rules_code.file_definition,
    "grep": rules_code.grep_hits,
    "ls": rules_code.ls_entry,
}
