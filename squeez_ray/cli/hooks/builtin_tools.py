"""Claude Code's built-in ``Read`` and ``Grep``: a PostToolUse hook that prunes their result in its own shape.

Bash hooks never see these tools. Claude Code (v2.1.121 changelog) lets a PostToolUse hook replace
any tool's result with ``hookSpecificOutput.updatedToolOutput``; the value is validated against that
tool's own output schema and silently dropped when it does not match (a bare string is dropped for
Read and Bash, anthropics/claude-code#86753 and #68951, reproduced by a maintainer on v2.1.233, who
showed Bash's object shape applied; #88118, v2.1.237, reads the host's code: a payload valid against
Read's schema replaces the result). So the answer is the payload's own ``tool_response`` with only the text
changed, and the hook answers nothing at all (the result stays as it was) on any doubt:

- a host version it cannot read, or one older than ``MIN_VERSION``: the payload carries no version,
  the transcript it names does (every Claude Code transcript entry has ``"version"``);
- a result shape other than the two below (key set and types checked), another Grep mode, an image,
  a notebook, a PDF; a result under ``MIN_CHARS``; the raw escape hatch (raw.py) for the session;
- a pruner that passed the text through (short, binary, timeout, missing model: prune_output's gates);
- a pruned answer it cannot map back onto the original lines one for one, or one still over the
  host's persistence limit for that tool (``LIMIT_CHARS``).

Shapes (fixtures: tests/fixtures/hooks/claude_code_posttooluse_*.json, with their sources):

    Read  {"type": "text", "file": {"filePath", "content", "numLines", "startLine", "totalLines",
           ["truncatedByTokenCap"]}}
          Claude Code numbers the lines of ``content`` from ``startLine`` when it shows them to the
          model, so the pruned content keeps every line: a kept line verbatim, an omitted stretch as one
          marker line then empty lines. Line numbers stay exact; numLines/totalLines do not change.
    Grep  {"mode": "content", "numFiles", "filenames", "content", "numLines", ["appliedLimit"],
           ["appliedOffset"]}: ``content`` holds ``path:line:text`` lines, pruned like any output
          (markers and footer), ``numLines`` recounted.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any

from squeez_ray.cli.hooks.raw import raw_requested
from squeez_ray.cli.hooks.transcript import host_version, last_user_prompt

if TYPE_CHECKING:  # for the annotation only: the hooks import settings when they run, so their start stays light
    from squeez_ray.cli.settings import Settings

# The first version a maintainer showed applying an object-shaped updatedToolOutput (Bash, anthropics/
# claude-code#68951, v2.1.233; the same day #86753 on Read). 2.1.121 introduced the key, but every report
# before 2.1.233 shows it dropped (strings, or no shape said), none shows it applied: nothing older is trusted.
MIN_VERSION = (2, 1, 233)
# Over these the host keeps a result on disk and shows the model a 2,000-character preview
# (Grep's maxResultSizeChars 20,000; Read's is unbounded, Read caps itself at 25,000 tokens, so the
# pruned text, never longer than the original, needs no cap of its own).
LIMIT_CHARS = {"Grep": 20_000 - 500}
# Smaller results are left alone: a file the agent reads to edit, a short search, are read whole.
MIN_CHARS = {"Read": 12_000, "Grep": 4_000}
HOOK_TIMEOUT_S = 20.0  # below the 30 s install gives the hook: past it the text passes through

_PROMPT_CHARS, _QUERY_CHARS = 300, 600  # as claude_code.py's
_READ_FILE_KEYS = {"filePath", "content", "numLines", "startLine", "totalLines"}
_READ_OPTIONAL = {"truncatedByTokenCap"}
_GREP_KEYS = {"mode", "numFiles", "filenames", "content", "numLines"}
_GREP_OPTIONAL = {"appliedLimit", "appliedOffset"}
_MARKER = re.compile(r"^\[squeez: (\d+) lines? omitted \((\d+)-(\d+)\); "
                     r"(?:squeez show (\S+) --lines \d+-\d+|full output not kept)\]$")
_FOOTER = re.compile(r"^\[squeez: kept \d+ of \d+ lines .*\]$")


def post_tool_use(payload: Any, settings: Settings | None = None, environ: Any = None) -> dict[str, Any] | None:
    """The PostToolUse answer for a Read or Grep payload, or None to leave the result as it is."""
    if not isinstance(payload, dict) or payload.get("hook_event_name") != "PostToolUse":
        return None
    tool = payload.get("tool_name")
    if tool not in ("Read", "Grep"):
        return None
    response, tool_input = payload.get("tool_response"), payload.get("tool_input")
    text = _read_text(response) if tool == "Read" else _grep_text(response)
    if text is None or len(text) < MIN_CHARS[tool] or not isinstance(tool_input, dict):
        return None
    if raw_requested("", payload.get("session_id"), environ):
        return None
    version = host_version(payload.get("transcript_path"))
    if version is None or version < MIN_VERSION:
        return None
    from squeez_ray.cli import settings as settings_mod
    from squeez_ray.cli.run import prune_output  # only now: the PreToolUse path imports no pruner

    settings = settings_mod.resolve() if settings is None else settings
    settings = dataclasses.replace(settings, line_numbers=False, timeout_s=min(settings.timeout_s, HOOK_TIMEOUT_S))
    query = _query(tool, tool_input, payload.get("transcript_path"))
    result = prune_output(query, text, settings)
    if not result.pruned:
        return None
    answer = result.data.decode("utf-8", errors="surrogateescape")
    lines = text.split("\n")
    layout = _layout(answer, lines)
    if layout is None:
        return None
    stretches, footer = layout
    if tool == "Read":
        updated = _read_answer(response, lines, stretches)
    else:
        updated = _grep_answer(response, answer, footer)
        if len(updated["content"]) > LIMIT_CHARS["Grep"]:
            return None
    return {"hookSpecificOutput": {"hookEventName": "PostToolUse", "updatedToolOutput": updated}}


def _read_text(response: Any) -> str | None:
    if not isinstance(response, dict) or set(response) != {"type", "file"} or response["type"] != "text":
        return None
    file = response["file"]
    if not isinstance(file, dict) or not _READ_FILE_KEYS <= set(file) <= _READ_FILE_KEYS | _READ_OPTIONAL:
        return None
    ints = ("numLines", "startLine", "totalLines")
    if not all(type(file[key]) is int for key in ints) or file["startLine"] < 1:
        return None
    if not isinstance(file["filePath"], str) or not isinstance(file["content"], str):
        return None
    return file["content"]


def _grep_text(response: Any) -> str | None:
    if not isinstance(response, dict) or not _GREP_KEYS <= set(response) <= _GREP_KEYS | _GREP_OPTIONAL:
        return None
    if response["mode"] != "content" or not isinstance(response["content"], str):
        return None
    if type(response["numFiles"]) is not int or type(response["numLines"]) is not int:
        return None
    if not isinstance(response["filenames"], list) or not all(isinstance(f, str) for f in response["filenames"]):
        return None
    if not all(type(response[key]) is int for key in _GREP_OPTIONAL & set(response)):
        return None
    return response["content"]


def _query(tool: str, tool_input: dict[str, Any], transcript_path: Any) -> str:
    """What the call looked for, plus the user's last request (as the Bash hook's query: claude_code.build_query)."""
    if tool == "Read":
        what = f"the lines of {tool_input.get('file_path', 'the file')!s} that matter for the task"
    else:
        where = tool_input.get("path") or tool_input.get("glob") or "the project"
        what = f"the matches of {tool_input.get('pattern', '')!s} in {where!s} that matter for the task"
    prompt = last_user_prompt(transcript_path)
    text = f"{what[:300]} (task: {prompt[:_PROMPT_CHARS]})" if prompt else what[:300]
    return " ".join(text.split())[:_QUERY_CHARS] or "the important lines"


def _layout(answer: str, lines: list[str]) -> tuple[list[tuple[int, int, str]], str] | None:
    """The omitted stretches (start, end, store id or "") of ``answer`` and its footer, checked line by
    line against the original: every other line must be the next original line, verbatim. None on doubt."""
    body = answer[:-1].split("\n") if answer.endswith("\n") else None
    if not body or not _FOOTER.match(body[-1]):
        return None
    footer = body.pop()
    n = len(lines) - 1 if lines and not lines[-1] else len(lines)  # markers.visible_line_count
    stretches: list[tuple[int, int, str]] = []
    position = 1
    for line in body:
        match = _MARKER.match(line)
        if match and int(match.group(2)) == position and position <= int(match.group(3)) <= n \
                and int(match.group(1)) == int(match.group(3)) - position + 1:
            stretches.append((position, int(match.group(3)), match.group(4) or ""))
            position = int(match.group(3)) + 1
        elif position <= n and line == lines[position - 1]:
            position += 1
        else:
            return None
    if position != n + 1 or not stretches:
        return None
    return stretches, footer


def _read_answer(response: dict[str, Any], lines: list[str], stretches: list[tuple[int, int, str]]) -> dict[str, Any]:
    """Every line in its place: an omitted stretch is one marker line (in the file's numbering) and blanks."""
    file = response["file"]
    offset = file["startLine"] - 1
    out = list(lines)
    for start, end, store_id in stretches:
        where = f"lines {start + offset}-{end + offset} of this file omitted"
        how = f"; squeez show {store_id} --lines {start}-{end} prints them" if store_id else ""
        out[start - 1:end] = [f"[squeez: {where}{how}]"] + [""] * (end - start)
    return {**response, "file": {**file, "content": "\n".join(out)}}


def _grep_answer(response: dict[str, Any], answer: str, footer: str) -> dict[str, Any]:
    content = answer[:-1]  # the kept lines, the markers and the footer, without the final newline
    return {**response, "content": content, "numLines": content.count("\n") + 1}
