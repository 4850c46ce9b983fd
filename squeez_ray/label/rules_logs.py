"""Rules for logs: test runs, tracebacks and docs from ``python``, pip, builds, linters, type checkers, coverage."""

from __future__ import annotations

import re

from squeez_ray.label.rule_base import Found, Obs

_PYTEST_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")
_PYTEST_LOCATION = re.compile(r"^\S+:\d+: ")


def test_failure(obs: Obs) -> Found:
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


def python_traceback(obs: Obs) -> Found:
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


def pydoc_entry(obs: Obs) -> Found:
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


def pip_failure(obs: Obs) -> Found:
    blocks = _error_blocks(obs.lines, re.compile(r"^ERROR:|^error:|^\s*(×|╰─>)"))
    if not blocks:
        return None
    target = obs.argument() or "the package"
    return obs.template(["Why does pip fail to install {t}?", "What error does pip report for {t}?"],
                        t=target), [(s + 1, e) for s, e in blocks[:3]]


def build_failure(obs: Obs) -> Found:
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


def lint_findings(obs: Obs) -> Found:
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


def _findings_by_file(obs: Obs, pattern: re.Pattern, what: str) -> Found:
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


def type_errors(obs: Obs) -> Found:
    return _findings_by_file(obs, re.compile(r"^(\S+?):\d+:(?:\d+:)? error: "), "type") or \
        _py_compile_error(obs)


def _py_compile_error(obs: Obs) -> Found:
    found = python_traceback(obs) if any("Traceback" in line for line in obs.lines) else None
    if found:
        return "What syntax or compile error does the file have?", found[1]
    blocks = _error_blocks(obs.lines, re.compile(r"(SyntaxError|IndentationError|TabError)"))
    return ("What syntax error does the file have?", [(s + 1, e) for s, e in blocks]) if blocks else None


_COVERAGE_ROW = re.compile(r"^(\S+\.py)\s+(\d+)\s+(\d+)\s+(\d+)%(?:\s+(.*))?$")


def coverage_gaps(obs: Obs) -> Found:
    header = next((i for i, line in enumerate(obs.lines) if line.startswith("Name") and "Stmts" in line), None)
    rows = [(i, m.group(1)) for i, line in enumerate(obs.lines)
            if (m := _COVERAGE_ROW.match(line)) and int(m.group(3)) > 0]
    if header is None or not rows:
        return test_failure(obs)
    row, path = obs.pick(rows, [r[1] for r in rows])
    return obs.template(["Which lines of {p} are not covered by the tests?", "How well is {p} covered?"],
                        p=path), [(header + 1, header + 1), (row + 1, row + 1)]

