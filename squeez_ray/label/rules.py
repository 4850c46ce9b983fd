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

import hashlib
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from squeez_ray.label.parse import Rejection
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


@dataclass(frozen=True)
class Obs:
    """What a rule sees: the output's lines, the argv it came from, the task text, a stable seed."""
    lines: list[str]
    argv: list[str]
    task: str
    key: str

    def pick(self, candidates: Sequence[Any], names: Sequence[str] | None = None) -> Any:
        """A candidate the task mentions if any, else a deterministic hash choice."""
        if names is not None and self.task:
            mentioned = [c for c, n in zip(candidates, names) if n and n in self.task]
            if mentioned:
                candidates = mentioned
        digest = int(hashlib.sha256(self.key.encode()).hexdigest()[:12], 16)
        return candidates[digest % len(candidates)]

    def template(self, options: Sequence[str], **values: str) -> str:
        digest = int(hashlib.sha256(("q" + self.key).encode()).hexdigest()[:8], 16)
        return options[digest % len(options)].format(**values)

    def argument(self, flag_free_index: int = -1) -> str:
        """A positional argument of the command (flags dropped), e.g. the path of ``cat -n -- path``."""
        plain = [a for a in self.argv[1:] if not a.startswith("-")]
        return plain[flag_free_index] if plain else ""


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


# ---------------------------------------------------------------- logs: tests, tracebacks, builds

_PYTEST_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")
_PYTEST_LOCATION = re.compile(r"^\S+:\d+: ")


def test_failure(obs: Obs) -> tuple[str, list[Span]] | None:
    """The failure block of one failing test in pytest output (header, location lines, E lines)."""
    lines = obs.lines
    headers = [i for i, line in enumerate(lines) if _PYTEST_SECTION.match(line)]
    if not headers:
        return None
    blocks = []
    for k, start in enumerate(headers):
        end = headers[k + 1] if k + 1 < len(headers) else len(lines)
        for j in range(start + 1, end):
            if lines[j].startswith("=") or lines[j].startswith("- generated"):
                end = j
                break
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1
        blocks.append((start, end, _PYTEST_SECTION.match(lines[start]).group(1)))
    start, end, name = obs.pick(blocks, [b[2].split("[")[0].split(".")[-1] for b in blocks])
    if end - start <= 15:
        spans = [(start + 1, end)]
    else:  # a long traceback: keep the header, the last location and the error lines
        spans = [(start + 1, start + 1)]
        error_lines = [j for j in range(start, end) if lines[j].startswith("E ")]
        locations = [j for j in range(start, end) if _PYTEST_LOCATION.match(lines[j])]
        if error_lines:
            spans.append((error_lines[0] + 1, error_lines[-1] + 1))
            before = [j for j in locations if j < error_lines[0]]
            if before:
                spans.append((before[-1] + 1, before[-1] + 2))
        if locations:
            spans.append((locations[-1] + 1, locations[-1] + 1))
    if name.startswith("ERROR collecting "):
        target = name.removeprefix("ERROR collecting ")
        return obs.template(["Why does pytest fail to collect {t}?", "What error stops {t} from being collected?"],
                            t=target), spans
    return obs.template(["Why does the test {t} fail?", "What assertion or error makes {t} fail?",
                         "What goes wrong in the failing test {t}?"], t=name), spans


_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)(?:, in (.+))?$')
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure)|[A-Za-z_][\w.]*Error)(:.*)?$")


def python_traceback(obs: Obs) -> tuple[str, list[Span]] | None:
    """The exception line and the frame that raised it (plus the last frame in project code)."""
    lines = obs.lines
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if not starts:
        return pydoc_entry(obs)
    start = starts[-1]
    frames = []
    exc_line = None
    for j in range(start + 1, len(lines)):
        match = _FRAME.match(lines[j])
        if match:
            frames.append((j, match.group(1)))
        elif not lines[j].startswith((" ", "\t")) and lines[j].strip():
            if _EXCEPTION.match(lines[j].strip()):
                exc_line = j
            break
    if exc_line is None or not frames:
        return None
    spans = [(exc_line + 1, exc_line + 1)]
    last = frames[-1][0]
    spans.append((last + 1, min(last + 2, exc_line)))
    project = [j for j, path in frames if "site-packages" not in path and "/lib/python" not in path]
    if project and project[-1] != last:
        spans.append((project[-1] + 1, min(project[-1] + 2, exc_line)))
    exc_type = lines[exc_line].split(":", 1)[0].strip()
    return obs.template(["Where is the {e} raised, and with what message?",
                         "What raises the {e} in this run, and why?",
                         "Which line of code triggers the {e}?"], e=exc_type), spans


_PYDOC_SIGNATURE = re.compile(r"^\s*(?:\|\s+)?([A-Za-z_]\w*)\((.*)\)(?:\s*->.*)?$")


def pydoc_entry(obs: Obs) -> tuple[str, list[Span]] | None:
    """``python`` tool output without a traceback: one documented function's signature and doc."""
    lines = obs.lines
    candidates = []
    for i, line in enumerate(lines):
        match = _PYDOC_SIGNATURE.match(line)
        if not match or match.group(1).startswith("_"):
            continue
        end = i + 1
        # pydoc indents class members behind " |  "; a line of only that prefix ends the entry
        while end < len(lines) and lines[end].strip(" |\t") and end - i < 10:
            end += 1
        if end - i >= 2:
            candidates.append((i, end, match.group(1)))
    if not candidates:
        return None
    start, end, name = obs.pick(candidates, [c[2] for c in candidates])
    return obs.template(["What arguments does {n} take and what does it do?",
                         "What does the documentation say {n} does?"], n=name), [(start + 1, end)]


_ERROR_LINE = re.compile(r"(^|\s|\[)(error|ERROR|Error|FAILED|fatal)(:|\]|\s|$)")


def _error_blocks(lines: list[str], pattern: re.Pattern = _ERROR_LINE) -> list[tuple[int, int]]:
    """Error lines plus the indented continuation lines right after them."""
    blocks = []
    i = 0
    while i < len(lines):
        if pattern.search(lines[i]) and "warning" not in lines[i].lower()[:20]:
            end = i + 1
            while end < len(lines) and lines[end].startswith((" ", "\t")) and lines[end].strip() and end - i < 6:
                end += 1
            blocks.append((i, end))
            i = end
        else:
            i += 1
    return blocks


def pip_failure(obs: Obs) -> tuple[str, list[Span]] | None:
    blocks = _error_blocks(obs.lines, re.compile(r"^ERROR:|^error:|^\s*(×|╰─>)"))
    if not blocks:
        return None
    target = obs.argument() or "the package"
    return obs.template(["Why does pip fail to install {t}?", "What error does pip report for {t}?"],
                        t=target), [(s + 1, e) for s, e in blocks[:3]]


def build_failure(obs: Obs) -> tuple[str, list[Span]] | None:
    if any(line.startswith("Traceback (most recent call last)") for line in obs.lines):
        found = python_traceback(obs)
        if found:
            return "What error breaks the build, and where is it raised?", found[1]
    blocks = _error_blocks(obs.lines)
    if not blocks:
        return None
    start, end = blocks[0]
    return obs.template(["What is the first error in this build and where does it come from?",
                         "Why does the build fail?"]), [(start + 1, end)]


_RUFF_FULL = re.compile(r"^([A-Z]{1,4}\d{2,4})\b")
_CONCISE = re.compile(r"^(\S+?):(\d+):(\d+): ([A-Z]{1,4}\d{2,4})\b")


def lint_findings(obs: Obs) -> tuple[str, list[Span]] | None:
    """All findings of one lint rule (ruff full or concise format; pyflakes-style lines by file)."""
    lines = obs.lines
    findings: list[tuple[str, int, int]] = []  # (rule code, start, end)
    for i, line in enumerate(lines):
        concise = _CONCISE.match(line)
        if concise:
            findings.append((concise.group(4), i, i + 1))
        elif _RUFF_FULL.match(line) and i + 1 < len(lines) and "-->" in lines[i + 1]:
            end = i + 1
            while end < len(lines) and lines[end].strip() and not _RUFF_FULL.match(lines[end]):
                end += 1
            findings.append((_RUFF_FULL.match(line).group(1), i, end))
    if not findings:
        return _findings_by_file(obs, re.compile(r"^(\S+?):\d+:(\d+:)? "), "lint")
    codes = sorted({code for code, _, _ in findings})
    small = [c for c in codes if sum(f[0] == c for f in findings) * 2 <= len(findings)] or codes
    code = obs.pick(small)
    spans = [(s + 1, e) for c, s, e in findings if c == code]
    return obs.template(["Where does the linter report {c} findings?", "Which lines violate lint rule {c}?"],
                        c=code), spans


def _findings_by_file(obs: Obs, pattern: re.Pattern, what: str) -> tuple[str, list[Span]] | None:
    by_file: dict[str, list[int]] = {}
    for i, line in enumerate(obs.lines):
        match = pattern.match(line)
        if match:
            by_file.setdefault(match.group(1), []).append(i)
    if not by_file:
        return None
    files = sorted(by_file)
    path = obs.pick(files, files)
    spans = []
    for i in by_file[path]:  # a finding plus its indented / note continuation lines
        end = i + 1
        while end < len(obs.lines) and (obs.lines[end].startswith((" ", "\t")) or ": note:" in obs.lines[end]) \
                and not pattern.match(obs.lines[end]) and obs.lines[end].strip():
            end += 1
        spans.append((i + 1, end))
    if what == "type":
        return obs.template(["What type errors are reported in {p}?", "Which type-checker errors point at {p}?"],
                            p=path), spans
    return obs.template(["What problems does the linter find in {p}?"], p=path), spans


def type_errors(obs: Obs) -> tuple[str, list[Span]] | None:
    return _findings_by_file(obs, re.compile(r"^(\S+?):\d+:(?:\d+:)? error: "), "type") or \
        _py_compile_error(obs)


def _py_compile_error(obs: Obs) -> tuple[str, list[Span]] | None:
    found = python_traceback(obs) if any("Traceback" in line for line in obs.lines) else None
    if found:
        return "What syntax or compile error does the file have?", found[1]
    blocks = _error_blocks(obs.lines, re.compile(r"(SyntaxError|IndentationError|TabError)"))
    return ("What syntax error does the file have?", [(s + 1, e) for s, e in blocks]) if blocks else None


_COVERAGE_ROW = re.compile(r"^(\S+\.py)\s+(\d+)\s+(\d+)\s+(\d+)%(?:\s+(.*))?$")


def coverage_gaps(obs: Obs) -> tuple[str, list[Span]] | None:
    header = next((i for i, line in enumerate(obs.lines) if line.startswith("Name") and "Stmts" in line), None)
    rows = [(i, m.group(1)) for i, line in enumerate(obs.lines)
            if (m := _COVERAGE_ROW.match(line)) and int(m.group(3)) > 0]
    if header is None or not rows:
        return test_failure(obs)
    row, path = obs.pick(rows, [r[1] for r in rows])
    return obs.template(["Which lines of {p} are not covered by the tests?", "How well is {p} covered?"],
                        p=path), [(header + 1, header + 1), (row + 1, row + 1)]


# ---------------------------------------------------------------- version control and files

_COMMIT = re.compile(r"^commit ([0-9a-f]{7,40})")


def git_commit(obs: Obs) -> tuple[str, list[Span]] | None:
    """The commit block whose subject the query names (header, message, stat summary)."""
    lines = obs.lines
    starts = [i for i, line in enumerate(lines) if _COMMIT.match(line)]
    if len(starts) < 2:
        return None
    blocks = []
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1
        subject = next((lines[j].strip() for j in range(start + 1, end) if lines[j].startswith("    ")), "")
        if subject:
            blocks.append((start, end, subject))
    if not blocks:
        return None
    start, end, subject = obs.pick(blocks, [b[2] for b in blocks])
    if end - start > 25:  # a huge --stat: keep the header, the message and the summary line
        message_end = next((j for j in range(start + 1, end) if lines[j].startswith("    ")), start + 1)
        while message_end < end and (lines[message_end].startswith("    ") or not lines[message_end].strip()):
            message_end += 1
        spans = [(start + 1, message_end), (end, end)]
    else:
        spans = [(start + 1, end)]
    subject = subject if len(subject) <= 120 else subject[:117] + "..."
    return obs.template(["Which commit made the change \"{s}\", and who authored it when?",
                         "Find the commit described as \"{s}\": what did it touch?"], s=subject), spans


_BLAME = re.compile(r"^\^?([0-9a-f]{7,40}) .*?\(.+?\s(\d+)\)\s?(.*)$")
_DEFINES = re.compile(r"^\s*(?:async\s+def|def|class)\s+([A-Za-z_]\w*)|^([A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=]+)?=\s")


def git_blame_line(obs: Obs) -> tuple[str, list[Span]] | None:
    candidates = []
    for i, line in enumerate(obs.lines):
        match = _BLAME.match(line)
        if match:
            code = _DEFINES.match(match.group(3))
            if code:
                candidates.append((i, code.group(1) or code.group(2)))
    if not candidates:
        return None
    i, name = obs.pick(candidates, [c[1] for c in candidates])
    return obs.template(["Who last changed the line that defines {n}, and in which commit?",
                         "Which commit last touched the definition of {n}?"], n=name), [(i + 1, i + 1)]


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@ ?(.*)$")


def git_diff_hunk(obs: Obs) -> tuple[str, list[Span]] | None:
    lines = obs.lines
    hunks = []
    path = ""
    for i, line in enumerate(lines):
        if line.startswith("+++ "):
            path = line[4:].removeprefix("b/")
        match = _HUNK.match(line)
        if match:
            end = i + 1
            while end < len(lines) and lines[end][:1] in (" ", "+", "-", "\\") and not lines[end].startswith("+++ ") \
                    and not lines[end].startswith("--- "):
                end += 1
            changed = [j for j in range(i + 1, end) if lines[j][:1] in "+-"]
            if changed:
                hunks.append((i, changed[0], changed[-1] + 1, path, match.group(1).strip()))
    if len(hunks) < 2:
        return None
    header, first, last, path, context = obs.pick(hunks, [h[4] for h in hunks])
    where = f"{path} near `{context[:60]}`" if context else path
    return obs.template(["What exactly changes in {w}?", "Which lines are added or removed in {w}?"], w=where), \
        [(header + 1, header + 1), (first + 1, last)]


_CAT_N = re.compile(r"^\s*\d+\t")
_PY_DEF = re.compile(r"^(\s*)(?:async\s+def|def|class)\s+([A-Za-z_]\w*)")
_TOML_SECTION = re.compile(r"^\[([^\]]+)\]\s*$")
_MD_SECTION = re.compile(r"^#{1,4}\s+(.+)$")


def file_definition(obs: Obs) -> tuple[str, list[Span]] | None:
    """One definition in a source file (def/class block), or one section of a config / markdown file."""
    code = [_CAT_N.sub("", line, count=1) for line in obs.lines]
    path = obs.argument() or "the file"
    blocks = []
    for i, line in enumerate(code):
        match = _PY_DEF.match(line)
        if not match:
            continue
        indent = len(match.group(1))
        end = i + 1
        while end < len(code) and (not code[end].strip() or len(code[end]) - len(code[end].lstrip()) > indent
                                   or code[end].lstrip().startswith((")", "]"))):
            end += 1
        while end > i + 1 and not code[end - 1].strip():
            end -= 1
        if 3 <= end - i <= 40:
            # decorators directly above belong to the definition
            top = i
            while top > 0 and code[top - 1].strip().startswith("@"):
                top -= 1
            blocks.append((top, end, match.group(2)))
    if blocks:
        start, end, name = obs.pick(blocks, [b[2] for b in blocks])
        return obs.template(["How is {n} implemented in {p}?", "What does {n} in {p} do?",
                             "Show the definition of {n} in {p}."], n=name, p=path), [(start + 1, end)]
    # "# ..." is a heading in markdown but a comment in toml / cfg / yaml: pick the pattern by suffix
    pattern = _MD_SECTION if path.endswith((".md", ".markdown")) else _TOML_SECTION
    sections = []
    for i, line in enumerate(code):
        match = pattern.match(line)
        if match:
            sections.append((i, match.group(1).strip()))
    ranges = []
    for k, (i, title) in enumerate(sections):
        end = sections[k + 1][0] if k + 1 < len(sections) else len(code)
        while end > i + 1 and not code[end - 1].strip():
            end -= 1
        if 2 <= end - i <= 40:
            ranges.append((i, end, title))
    if not ranges:
        return None
    start, end, title = obs.pick(ranges, [r[2] for r in ranges])
    return obs.template(["What does the {t} section of {p} say?", "What is set under {t} in {p}?"],
                        t=title, p=path), [(start + 1, end)]


_GREP_HIT = re.compile(r"^(.+?):(\d+):(.*)$")


def grep_hits(obs: Obs) -> tuple[str, list[Span]] | None:
    """The hits that define the searched symbol, else the hits in one file."""
    pattern = ""
    if "-e" in obs.argv:
        index = obs.argv.index("-e") + 1
        pattern = obs.argv[index] if index < len(obs.argv) else ""
    hits = [(i, m.group(1), m.group(3)) for i, line in enumerate(obs.lines) if (m := _GREP_HIT.match(line))]
    if len(hits) < 2:
        return None
    name = re.escape(pattern.strip())
    defining = [i for i, _, text in hits
                if name and re.match(rf"\s*(?:async\s+def|def|class)\s+{name}\b|\s*{name}\s*(?::[^=]+)?=[^=]", text)]
    if defining and len(defining) * 2 <= len(hits):
        return obs.template(["Where is {n} defined?", "Which file defines {n}?"], n=pattern.strip()), \
            [(i + 1, i + 1) for i in defining]
    tests = [i for i, path, _ in hits if "test" in path.rsplit("/", 1)[-1]]
    if tests and len(tests) * 2 <= len(hits):
        return obs.template(["Which tests use {n}?", "Where do the tests exercise {n}?"], n=pattern.strip()), \
            [(i + 1, i + 1) for i in tests]
    by_file: dict[str, list[int]] = {}
    for i, path, _ in hits:
        by_file.setdefault(path, []).append(i)
    files = [f for f in sorted(by_file) if len(by_file[f]) * 2 <= len(hits)]
    if not files:
        return None
    path = obs.pick(files, files)
    return obs.template(["Where does {f} use {n}?", "Which lines of {f} mention {n}?"], f=path,
                        n=pattern.strip() or "the pattern"), [(i + 1, i + 1) for i in by_file[path]]


_LS_ENTRY = re.compile(r"^([dl-])[rwxsStT-]{9}\S*\s+\d+\s+\S+\s+\S+\s+(\d+)\s+(\S+\s+\S+\s+\S+)\s+(.+)$")


def ls_entry(obs: Obs) -> tuple[str, list[Span]] | None:
    entries = [(i, m.group(1), m.group(4)) for i, line in enumerate(obs.lines)
               if (m := _LS_ENTRY.match(line)) and m.group(4) not in (".", "..")]
    if len(entries) < 3:
        return None
    dirs = [e for e in entries if e[1] == "d"]
    if dirs and len(dirs) * 2 <= len(entries) and obs.pick([0, 1]) == 0:
        return obs.template(["Which subdirectories does {p} contain?"], p=obs.argument() or "the directory"), \
            [(i + 1, i + 1) for i, _, _ in dirs]
    i, _, name = obs.pick(entries, [e[2] for e in entries])
    return obs.template(["How large is {n} and when was it last modified?", "What are the permissions of {n}?"],
                        n=name), [(i + 1, i + 1)]


RULES: dict[str, Callable[[Obs], tuple[str, list[Span]] | None]] = {
    "test_output": test_failure,
    "python": python_traceback,
    "pip_install": pip_failure,
    "build_output": build_failure,
    "lint_output": lint_findings,
    "type_check": type_errors,
    "coverage": coverage_gaps,
    "git_log": git_commit,
    "git_blame": git_blame_line,
    "git_diff": git_diff_hunk,
    "read_file": file_definition,
    "grep": grep_hits,
    "ls": ls_entry,
}
