"""Cut a tool output into its natural blocks, so a line's score can depend on whether its block is the
one the query names (a query about ``test_foo`` wants the ``test_foo`` failure, not a line of each).

One pass over the lines; a line that opens a block starts a new one. What opens a block:

- a pytest section header (``____ test_x ____``, ``==== FAILURES ====``);
- a diff file (``diff --git``) or hunk (``@@ ... @@``); a git log commit (``commit <sha>``);
- a traceback (``Traceback (most recent call last):``) or one of its frames (``  File "x.py", line 3``);
- a ``def`` / ``class`` / ``fn`` / ``func`` / ``function`` line in a file read (``cat -n`` numbered lines, any
  indentation) or at column 0 elsewhere;
- a change of file in grep / lint output (``path:12:...`` lines: one block per file).

An output with none of these falls back to paragraphs split at blank lines. The segmenter is a heuristic
with no knowledge of the query; a wrong cut only blurs a feature the learned combiner weighs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

_NUMBERED = re.compile(r"^\s*\d+\t")  # cat -n / read_file line numbers
_HEADERS = re.compile(
    r"^(_{3,} .+ _{3,}|={3,} .+ ={3,}|diff --git |@@ .* @@|commit [0-9a-f]{7,40}\b|Traceback \(most recent call"
    r"|\s*File \".+\", line \d+)")
_DEFINITION = re.compile(
    r"^\s*(async\s+def|def|class|fn|pub\s+fn|pub\s+(async\s+)?fn|func|function|impl|struct|interface|module)\s+\w")
_GREP = re.compile(r"^([^\s:]+\.[A-Za-z0-9]+|[^\s:]+/[^\s:]+):(\d+)[:-]")
# Every marker above sits at the start of its line, and these patterns backtrack on long lines without
# spaces (base64, minified JS: a 50 KB line of ``a/`` took 12 s in _GREP, growing with the square of its
# length), so they only ever see a line's head.
LINE_HEAD = 512


def block_ids(lines: Sequence[str]) -> np.ndarray:
    """One block number per line (0, 1, ...; non-decreasing): structural blocks where the output has
    them, else blank-line paragraphs."""
    ids = np.zeros(len(lines), dtype=np.int64)
    block, structural, last_file = 0, False, None
    for i, full_line in enumerate(lines):
        line = full_line[:LINE_HEAD]
        body = _NUMBERED.sub("", line, count=1)
        grep = _GREP.match(line)
        # a definition opens a block in a file read (numbered lines) or at column 0; an indented ``def``
        # in a pytest report or a traceback is a quoted line inside that block
        definition = _DEFINITION.match(body) and (body != line or not line[:1].isspace())
        opens = bool(_HEADERS.match(body) or definition)
        if grep:
            opens = opens or grep.group(1) != last_file
            last_file = grep.group(1)
        if opens and i > 0:
            block += 1
        structural = structural or opens
        ids[i] = block
    if structural:
        return ids
    return paragraph_ids(lines)


def paragraph_ids(lines: Sequence[str]) -> np.ndarray:
    """Blocks separated by blank lines (a blank line belongs to the paragraph before it)."""
    ids = np.zeros(len(lines), dtype=np.int64)
    block, previous_blank = 0, False
    for i, line in enumerate(lines):
        blank = not line.strip()
        if previous_blank and not blank:
            block += 1
        previous_blank = blank
        ids[i] = block
    return ids
