"""Cut a tool output into evidence blocks: the units an agent reads whole (pure Python, no numpy).

An evidence block is a short run of lines that belong together: one grep hit with its context, one lint
finding, one compiler diagnostic with its notes and caret lines, one traceback frame, one pytest failure
section, one diff hunk, one commit header, one function or class body, one paragraph of a log. The
block-first pruner (``block_decoder``) decides whole blocks and trims each kept block to the contiguous
run its scores pick, instead of deciding every line on its own; the shortlist (``block_shortlist``)
ranks blocks, not lines.

The cut is structural and knows nothing of the query. It refines ``encoder_blocks.block_ids`` (the
fusion's coarse blocks, one per file of grep output): every hit and finding opens its own block, code
opens at definitions and at top-level statements after a blank line, and no block runs longer than
``MAX_BLOCK`` lines (a long one is cut at blank lines, else into equal pieces), so a kept block never
drags in a page.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MAX_BLOCK = 24  # lines: longer blocks are cut, so trimming a kept block stays local
LINE_HEAD = 512  # patterns only ever see a line's head (long lines without spaces backtrack)

_NUMBERED = re.compile(r"^\s*\d+(\t|: |\s{2,}|→)")  # cat -n, nl, read_file line numbers
_HEADER = re.compile(
    r"^(_{3,} .+ _{3,}|={3,} .+ ={3,}|-{3,} .+ -{3,}|diff --git |@@ .* @@|commit [0-9a-f]{7,40}\b"
    r"|Traceback \(most recent call|\s*File \".+\", line \d+|During handling of the above exception"
    r"|The above exception was the direct cause|FAILED |ERROR |PASSED |=+$|-{5,}$|\*{5,}$)")
_DEFINITION = re.compile(
    r"^\s*(@\w|async\s+def\s|def\s|class\s|fn\s|pub\s|func\s|function\s|impl\b|struct\s|interface\s|enum\s"
    r"|module\s|export\s|const\s+\w+\s*=\s*(async\s*)?\(|(public|private|protected|static)\s)")
# grep / git grep / lint / compiler locations: ``path:12:`` (a hit or finding), ``path-12-`` (grep context)
_HIT = re.compile(r"^(?:\x1b\[[0-9;]*m)*([^\s:]+\.[A-Za-z0-9]+|[^\s:]+/[^\s:]+)(?:\x1b\[[0-9;]*m)*:(\d+)[:,]")
_CONTEXT = re.compile(r"^([^\s:]+\.[A-Za-z0-9]+|[^\s:]+/[^\s:]+)-\d+-")
# a location that continues the block above it: pytest's crash line (``t.py:3: AssertionError``) and its short
# traceback entries (``t.py:12: in test_x``)
_LOCATION_IN_REPORT = re.compile(r"^\S+:\d+: (in \S+$|(\w+\.)*[A-Z]\w*(Error|Exception|Warning|Exit)\b)")
_NOTE = re.compile(r"^\S+:\d+(:\d+)?: (note|help)\b|^\s+(\||=|-->|\^)|^\s*\^[~^]*\s*$")
_LOG_START = re.compile(r"^(\[?\d{4}-\d\d-\d\d[ T]|\[?\d\d:\d\d:\d\d|\w{3} [ \d]\d \d\d:\d\d:\d\d"
                        r"|(DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL|TRACE)\b)")


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" \t"))


def _body(line: str) -> str:
    """A line's head without a file read's line number."""
    return _NUMBERED.sub("", line[:LINE_HEAD], count=1)


def _opens(line: str, body: str, previous: str, previous_blank: bool, state: dict) -> bool:
    """Whether ``line`` starts a new block. ``state`` carries what grep output needs across lines:
    ``hit`` (the last line was a hit or its trailing context) and ``leading`` (a group of leading context
    lines is open, its hit still to come)."""
    head = line[:LINE_HEAD]
    hit = _HIT.match(head)
    if hit:
        continues = (bool(_NOTE.match(head)) or state["leading"]  # a compiler note; the hit its context led to
                     or bool(_LOCATION_IN_REPORT.match(head)))  # pytest's location inside its failure section
        state.update(hit=True, leading=False)
        return not continues
    if head.strip() == "--":  # grep's group separator ends the group above it
        state.update(hit=False, leading=False)
        return False
    if _CONTEXT.match(head):
        # context lines before a hit open its group; after a hit they continue it
        opens = not state["hit"] or previous_blank
        state.update(leading=state["leading"] or opens)
        return opens
    state.update(hit=False, leading=False)
    if _HEADER.match(body):
        state["log"] = False
        return True
    numbered = body != head
    if _DEFINITION.match(body) and (numbered or not body[:1].isspace()):
        # a definition opens a block in a file read (numbered lines, any indentation) or at column 0
        # elsewhere (an indented ``def`` in a pytest report is a quoted line), unless a decorator opened it
        decorated = previous.lstrip().startswith("@") and _indent(previous) == _indent(body)
        return not decorated
    if _LOG_START.match(body):
        # a burst of log records opens where it starts (after a blank line or after lines of another kind)
        opens, state["log"] = previous_blank or not state.get("log"), True
        return opens
    state["log"] = False
    # a top-level statement after a blank line (code, config, prose paragraphs)
    return previous_blank and bool(body.strip()) and _indent(body) == 0


def block_spans(lines: Sequence[str], max_block: int = MAX_BLOCK) -> list[tuple[int, int]]:
    """The output's blocks as 0-based half-open ``(start, end)`` pairs that tile ``range(len(lines))``."""
    starts: list[int] = []
    previous, previous_blank, state = "", True, {"hit": False, "leading": False}
    blank = []
    for i, line in enumerate(lines):
        body = _body(line)
        if _opens(line, body, previous, previous_blank, state) or i == 0:
            starts.append(i)
        previous_blank = not body.strip()
        blank.append(previous_blank)
        if not previous_blank:
            previous = body
    bounds = starts + [len(lines)]
    spans: list[tuple[int, int]] = []
    for start, end in zip(bounds, bounds[1:]):
        spans.extend(_cut_long(blank, start, end, max_block))
    return spans


def _cut_long(blank: Sequence[bool], start: int, end: int, max_block: int) -> list[tuple[int, int]]:
    """A block over ``max_block`` lines cut at its blank lines, and pieces still too long cut evenly."""
    if end - start <= max_block:
        return [(start, end)]
    pieces, piece_start = [], start
    for i in range(start + 1, end):
        if blank[i - 1] and not blank[i]:
            pieces.append((piece_start, i))
            piece_start = i
    pieces.append((piece_start, end))
    out: list[tuple[int, int]] = []
    for a, b in pieces:
        n_parts = -(-(b - a) // max_block)
        size = -(-(b - a) // n_parts)
        out.extend((s, min(s + size, b)) for s in range(a, b, size))
    return out
