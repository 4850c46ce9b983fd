"""Output an agent can get back: recoverable omission markers, and the lines a marker points to.

In ``squeez run``, hook and MCP output (and the pipe with ``--markers``) every dropped stretch is
replaced, in place, by one line naming its range and the command that prints it::

    [squeez: 412 lines omitted (120-531); squeez show 3f2a9c1b7d4e --lines 120-531]

``squeez show ID --lines A-B`` prints exactly lines A..B of the stored original (1-based,
inclusive), byte for byte: each line with the newline it had, the last one without if the
original ended there without one.

Line numbers are those of ``spans.split_lines`` (split on ``\\n``), except that the empty "line"
after a final newline is not a line a reader sees: it is never reported omitted, and never shown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence


class LinesError(ValueError):
    """A line range that is malformed or lies outside the stored output."""


def visible_line_count(lines: Sequence[str] | Sequence[bytes]) -> int:
    """Lines a reader sees: the empty piece after a trailing newline does not count."""
    n = len(lines)
    return n - 1 if n and not lines[-1] else n


def marker(start: int, end: int, store_id: str | None) -> str:
    count = end - start + 1
    what = f"{count} line{'s' if count != 1 else ''} omitted ({start}-{end})"
    if store_id:
        return f"[squeez: {what}; squeez show {store_id} --lines {start}-{end}]"
    return f"[squeez: {what}; full output not kept]"


def render_marked(lines: Sequence[str], spans: Sequence[Sequence[int]], store_id: str | None, *,
                  line_numbers: bool = False) -> str:
    """The kept lines, verbatim, with one marker line in place of each dropped stretch."""
    n = visible_line_count(lines)
    width = len(str(n))
    out: list[str] = []
    previous_end = 0
    for start, end in spans:
        start, end = int(start), min(int(end), n)
        if start > n:
            break
        if start > previous_end + 1:
            out.append(marker(previous_end + 1, start - 1, store_id))
        for number in range(start, end + 1):
            out.append(f"{number:>{width}}: {lines[number - 1]}" if line_numbers else lines[number - 1])
        previous_end = end
    if previous_end < n:
        out.append(marker(previous_end + 1, n, store_id))
    return "\n".join(out)


_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+))?\s*$")


def parse_line_range(text: str) -> tuple[int, int]:
    """``"120-531"`` (or a single ``"120"``) -> (120, 531)."""
    match = _RANGE.match(text or "")
    if not match:
        raise LinesError(f"--lines {text!r}: expected A-B (1-based, inclusive), e.g. --lines 120-531")
    try:
        start = int(match.group(1))
        end = int(match.group(2) or start)
    except ValueError:  # over Python's 4,300-digit conversion limit: no output has that many lines
        raise LinesError(f"--lines: a line number of {max(map(len, match.groups('')))} digits is out of range") from None
    if start < 1 or end < start:
        raise LinesError(f"--lines {text}: need 1 <= A <= B")
    return start, end


def select_lines(data: bytes, start: int, end: int, *, ident: str = "the output") -> bytes:
    """Lines ``start``..``end`` of ``data``, byte-exact (each with its own newline)."""
    pieces = data.split(b"\n")
    n = visible_line_count(pieces)
    if start < 1 or end < start or end > n:
        raise LinesError(f"lines {start}-{end} are out of range: {ident} has {n} line{'s' if n != 1 else ''}"
                         + (f" (ask for 1-{n} or less)" if n else ""))
    chosen = b"\n".join(pieces[start - 1:end])
    return chosen + b"\n" if end < len(pieces) else chosen
