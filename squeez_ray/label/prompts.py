"""Teacher prompts: the project's own wording for the two labelling stages, the retry and synthesis.

Stage 1 asks for a focused query: what an agent working on the task would want from THIS output,
phrased for the tool that produced it. Stage 2 shows the output with line numbers and asks for the
smallest spans that answer the query. When a positive gets no spans, the retry shows the output
first and the query last ("content first"), which helps models that otherwise stop reading early.
Every stage asks for one JSON object so replies can be checked by ``parse.py``.
"""

from __future__ import annotations

from squeez_ray.spans import render, split_lines

# What each tool type's output usually answers; the query writer uses it to stay tool-aware.
TOOL_HINTS: dict[str, str] = {
    "read_file": "a file's content: definitions, configuration values, a specific code block",
    "grep": "search hits: which files and lines mention something",
    "ls_find": "file listings: which paths exist or match a pattern",
    "git_log": "commit history: which commit made a change, who and when",
    "git_blame": "line authorship: who last changed a line and in which commit",
    "git_diff": "a diff: which hunks change a given function or setting",
    "test_output": "a test run: which tests fail and the assertion or error behind a failure",
    "python_traceback": "a traceback: the exception, and the frame in project code that raised it",
    "build_output": "a build log: the first real error and its location",
    "lint": "linter findings: which rule fires where",
    "type_check": "type-checker findings: which file and line has which type error",
    "pip_install": "an install log: which requirement failed and why",
    "coverage": "a coverage report: which modules or lines are not covered",
}

QUERY_SYSTEM = (
    "You help build training data for a tool-output pruner used by coding agents. You see the task "
    "an agent is working on and one raw output of a tool the agent ran. Write the question the agent "
    "most plausibly needs this output to answer for the next step: one short, specific sentence that "
    "names the concrete thing to find (a test, symbol, file, error, commit, setting). The question "
    "must be answerable from a few lines of this output and must not quote those lines. "
    'Reply with JSON only: {"query": "..."}'
)

SPANS_SYSTEM = (
    "You label evidence in tool output for a coding agent. The output is shown with line numbers. "
    "Select the smallest set of line ranges the agent must read to answer the query: the lines that "
    "hold the answer plus only the context needed to understand them (for example the header of the "
    "failing test, the raising frame, the commit header). Usually this is well under a fifth of the "
    "output. Ranges are 1-based and inclusive. "
    'Reply with JSON only: {"spans": [[start, end], ...]}'
)

RETRY_SYSTEM = (
    "Read the numbered tool output first, then the query at the end. The query was written for this "
    "output, so some lines do answer it: find them. Give the smallest line ranges (1-based, "
    "inclusive) that contain the answer. "
    'Reply with JSON only: {"spans": [[start, end], ...]}'
)

SYNTH_SYSTEM = (
    "You write realistic raw terminal output for training a tool-output pruner. Produce exactly what "
    "the named tool would print for the scenario: real formatting, paths, line numbers, timestamps "
    "and noise (progress lines, warnings, passing steps) around the part that matters. Do not "
    "explain anything and do not add markers. "
    'Reply with JSON only: {"command": "...", "tool_output": "..."}'
)


def numbered(tool_output: str) -> str:
    """The output with 1-based line numbers, through the shared span renderer (one numbering everywhere)."""
    lines = split_lines(tool_output)
    return render(lines, [(1, len(lines))], line_numbers=True) if lines else ""


def _tool_line(tool_type: str, command: str) -> str:
    hint = TOOL_HINTS.get(tool_type)
    about = f" (typically answers questions about {hint})" if hint else ""
    return f"Tool type: {tool_type}{about}\nCommand: {command or '(unknown)'}"


def query_messages(task: str, tool_type: str, command: str, tool_output: str, max_query_chars: int) -> list[dict]:
    user = (f"Task the agent is working on:\n{task.strip() or '(no task text; infer a plausible need)'}\n\n"
            f"{_tool_line(tool_type, command)}\n\nTool output:\n{tool_output}\n\n"
            f"Write the query (at most {max_query_chars} characters).")
    return [{"role": "system", "content": QUERY_SYSTEM}, {"role": "user", "content": user}]


def spans_messages(query: str, tool_type: str, command: str, tool_output: str) -> list[dict]:
    n = len(split_lines(tool_output))
    user = (f"Query: {query}\n\n{_tool_line(tool_type, command)}\n\n"
            f"Numbered output ({n} lines):\n{numbered(tool_output)}")
    return [{"role": "system", "content": SPANS_SYSTEM}, {"role": "user", "content": user}]


def retry_messages(query: str, tool_type: str, command: str, tool_output: str) -> list[dict]:
    n = len(split_lines(tool_output))
    user = (f"Numbered output ({n} lines):\n{numbered(tool_output)}\n\n{_tool_line(tool_type, command)}\n\n"
            f"Query: {query}")
    return [{"role": "system", "content": RETRY_SYSTEM}, {"role": "user", "content": user}]


def synth_messages(family: str, tool: str, ecosystem: str, scenario: str, min_lines: int, max_lines: int) -> list[dict]:
    user = (f"Ecosystem: {ecosystem}\nTool: {tool}\nFamily: {family}\nScenario: {scenario}\n\n"
            f"Write between {min_lines} and {max_lines} lines of output.")
    return [{"role": "system", "content": SYNTH_SYSTEM}, {"role": "user", "content": user}]


# JSON schemas of the replies, for engines that can constrain decoding (vLLM structured outputs):
# a constrained teacher never loses a row to invalid JSON, only to what parse.py checks beyond it.
QUERY_SCHEMA = {"type": "object", "properties": {"query": {"type": "string", "minLength": 1, "maxLength": 300}},
                "required": ["query"], "additionalProperties": False}
SYNTH_SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}, "tool_output": {"type": "string"}},
                "required": ["command", "tool_output"], "additionalProperties": False}


def spans_schema(n_lines: int | None = None) -> dict:
    """Spans as [[start, end], ...]; with ``n_lines`` the line numbers are bounded to the output."""
    line = {"type": "integer", "minimum": 1, **({"maximum": n_lines} if n_lines else {})}
    pair = {"type": "array", "minItems": 2, "maxItems": 2, "items": line}
    return {"type": "object", "additionalProperties": False, "required": ["spans"],
            "properties": {"spans": {"type": "array", "maxItems": 32, "items": pair}}}


def reply_schema(messages: list[dict], n_lines: int | None = None) -> dict | None:
    """The JSON schema the reply to ``messages`` must follow (by the stage's system prompt)."""
    system = messages[0]["content"] if messages else None
    if system in (SPANS_SYSTEM, RETRY_SYSTEM):
        return spans_schema(n_lines)
    return {QUERY_SYSTEM: QUERY_SCHEMA, SYNTH_SYSTEM: SYNTH_SCHEMA}.get(system)
