"""Line spans: the one representation of "which lines to keep" across the project.

A span is ``(start, end)``, 1-based and inclusive, over ``text.split("\\n")``. We split on
``"\\n"`` only (never ``splitlines``) so ``\\r``, form feeds and other separators stay inside a
line exactly as the tool printed them, and the line count matches METRICS.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Span = tuple[int, int]


class SpanError(ValueError):
    """A span list that breaks the contract (out of range, reversed, not integers)."""


def split_lines(text: str) -> list[str]:
    return text.split("\n")


def normalize_spans(spans: Iterable[Sequence[int]], n_lines: int, *, where: str = "") -> list[Span]:
    """Sort, merge overlapping or touching spans, and check they lie within ``1..n_lines``.

    ``where`` names the example (file, row, id) so an error can say which one is wrong.
    """
    checked: list[Span] = []
    prefix = f"{where}: " if where else ""
    for raw in spans:
        try:
            start, end = (int(raw[0]), int(raw[1])) if not isinstance(raw, dict) else (
                int(raw["start_line"]), int(raw["end_line"]))
        except (TypeError, ValueError, KeyError, IndexError):
            raise SpanError(f"{prefix}span {raw!r} is not a (start_line, end_line) pair of integers") from None
        if start < 1 or end < start or end > n_lines:
            raise SpanError(
                f"{prefix}span ({start}, {end}) is out of range: need 1 <= start <= end <= {n_lines} "
                f"(the output has {n_lines} lines)")
        checked.append((start, end))
    checked.sort()
    merged: list[Span] = []
    for start, end in checked:
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def spans_from_line_numbers(line_numbers: Iterable[int]) -> list[Span]:
    """Group 1-based line numbers into merged spans."""
    spans: list[Span] = []
    for n in sorted(set(line_numbers)):
        if spans and n == spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], n)
        else:
            spans.append((n, n))
    return spans


def line_numbers_of(spans: Iterable[Sequence[int]]) -> list[int]:
    return [n for start, end in spans for n in range(int(start), int(end) + 1)]


def count_lines(spans: Iterable[Sequence[int]]) -> int:
    return sum(int(end) - int(start) + 1 for start, end in spans)


def kept_text(lines: Sequence[str], spans: Iterable[Sequence[int]]) -> str:
    """The kept lines, verbatim, joined by newlines (the "predicted text" of METRICS.md)."""
    return "\n".join(lines[n - 1] for start, end in spans for n in range(int(start), int(end) + 1))


def render(lines: Sequence[str], spans: Sequence[Sequence[int]], *, line_numbers: bool = False,
           markers: bool = False) -> str:
    """Show the kept lines as the agent sees them.

    ``line_numbers`` prefixes each line with its source number; ``markers`` puts
    ``... [N lines omitted]`` where lines were cut (before, between and after kept blocks).
    """
    width = len(str(len(lines)))
    out: list[str] = []
    previous_end = 0
    for start, end in spans:
        if markers and start > previous_end + 1:
            out.append(f"... [{start - previous_end - 1} lines omitted]")
        for n in range(start, end + 1):
            out.append(f"{n:>{width}}: {lines[n - 1]}" if line_numbers else lines[n - 1])
        previous_end = end
    # Nothing kept still says what was cut: an empty answer with markers on is one marker line, so a
    # re-pruned observation never turns silently blank.
    if markers and previous_end < len(lines):
        out.append(f"... [{len(lines) - previous_end} lines omitted]")
    return "\n".join(out)
