"""The range-answer prompt format (``squeez-ranges-v1``) for models squeez-ray trains itself.

The released checkpoint copies every kept line back verbatim (``squeez_ray.prompt``: that contract is
untouched and stays the default). A model trained in this format reads the tool output with its
lines numbered and answers only the numbers, so decoding costs a few tokens per block instead of
every kept line::

    user turn:  <query>\\n{query}\\n</query>\\n<tool_output>\\n1|first line\\n2|second line\\n...\\n</tool_output>
    answer:     <relevant_lines>\\n12-18, 40\\n</relevant_lines>      (an empty pair for negatives)

Everything else is the released layout (hand-built ChatML, the same query cut, the family's prefix
and stop strings). Numbers are the output's own 1-based line numbers, also inside a chunk of a longer
output, and the runtime maps them back to those verbatim lines: nothing the model writes is returned.
A checkpoint records the format it was trained in (``prompt_format`` in squeez_train.json and the
merged checkpoint's manifest.json); serving, ``squeez eval``, bulk evaluation and re-prune read it there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from squeez_ray.prompt import CLOSE, OPEN, PROMPT_FORMAT, RANGES_FORMAT, render_prompt

RANGES_SYSTEM_PROMPT = (
    "You prune tool output for a coding agent. Given the agent's query and one raw tool output whose lines "
    "are numbered (12|text), return only the line numbers of the smallest blocks of lines the agent needs "
    "to read next, as ranges inside <relevant_lines> tags, for example 12-18, 40. "
    "If nothing in the output answers the query, return an empty <relevant_lines></relevant_lines> pair."
)
NUMBER_SEPARATOR = "|"
FORMATS = (PROMPT_FORMAT, RANGES_FORMAT)

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)
_DASH = re.compile(r"\s*[-\u2013]\s*")  # "12 - 18", "12–18" -> "12-18"
_ITEM = re.compile(r"(\d{1,9})(?:-(\d{1,9}))?")


def default_system_prompt(prompt_format: str) -> str:
    from squeez_ray.prompt import DEFAULT_SYSTEM_PROMPT

    return RANGES_SYSTEM_PROMPT if prompt_format == RANGES_FORMAT else DEFAULT_SYSTEM_PROMPT


def number_lines(lines: Sequence[str], first_line: int = 1) -> str:
    """The tool output as the model reads it: ``{n}|{line}`` per line, numbered from ``first_line``."""
    return "\n".join(f"{first_line + i}{NUMBER_SEPARATOR}{line}" for i, line in enumerate(lines))


def render_ranges_prompt(query: str, lines: Sequence[str], system_prompt: str = RANGES_SYSTEM_PROMPT,
                         first_line: int = 1) -> str:
    """The released ChatML layout around the numbered output (the family's prefix goes before it)."""
    return render_prompt(query, number_lines(lines, first_line), system_prompt)


def format_ranges(line_numbers: Iterable[int]) -> str:
    """Sorted unique numbers as compact ranges: [12..18, 40] -> ``12-18, 40``."""
    numbers = sorted(set(int(n) for n in line_numbers))
    parts: list[str] = []
    start = prev = None
    for n in numbers + [None]:  # the None flushes the last run
        if start is not None and (n is None or n != prev + 1):
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if n is not None:
            start = n if start is None else start
            prev = n
    return ", ".join(parts)


def render_ranges_target(line_numbers: Iterable[int]) -> str:
    """The assistant answer: ranges of kept line numbers, or an empty pair for a negative."""
    body = format_ranges(line_numbers)
    return f"{OPEN}\n{body}\n{CLOSE}" if body else f"{OPEN}\n{CLOSE}"


@dataclass(frozen=True)
class RangeAnswer:
    line_numbers: list[int]  # sorted, unique, all within the lines shown
    items: int  # range items read (well-formed or not): the answer's size in "lines" of the contract
    malformed: int  # items that are not a number or a range (dropped)
    out_of_range: int  # items wholly or partly outside the lines shown (the outside part dropped)
    reversed: int  # items written high-low (read as low-high)
    tagged: bool  # the answer opened the <relevant_lines> tag
    complete: bool  # False when the closing tag is missing (e.g. generation hit max_tokens)


def parse_ranges(reply: str, first_line: int, last_line: int) -> RangeAnswer:
    """Read a range answer against the shown lines ``first_line..last_line`` (1-based, inclusive).

    Items are separated by commas, semicolons or whitespace; an item is ``N`` or ``A-B``. Reversed
    ranges are read low-high, overlapping ones merged, numbers outside the shown lines dropped (a
    range is clipped to them), anything else dropped as malformed; each is counted. A reply cut
    before its closing tag loses its last item when that could itself be cut (``12-1`` of ``12-18``).
    """
    text = _THINK.sub("", reply).strip()
    start = text.find(OPEN)
    tagged = start >= 0
    body = text[start + len(OPEN):] if tagged else text
    end = body.find(CLOSE)
    complete = end >= 0 or not tagged
    body = body[:end] if end >= 0 else body
    pieces = [p for p in re.split(r"[,;\s]+", _DASH.sub("-", body)) if p]
    if not complete and pieces and not re.search(r"[,;\s]$", body):
        pieces.pop()  # the last item may be cut mid-number
    kept: set[int] = set()
    malformed = out_of_range = reversed_ = 0
    for piece in pieces:
        match = _ITEM.fullmatch(piece)
        if match is None:
            malformed += 1
            continue
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) else low
        if high < low:
            low, high = high, low
            reversed_ += 1
        clipped_low, clipped_high = max(low, first_line), min(high, last_line)
        if (clipped_low, clipped_high) != (low, high):
            out_of_range += 1
        if clipped_low <= clipped_high:
            kept.update(range(clipped_low, clipped_high + 1))
    return RangeAnswer(sorted(kept), len(pieces), malformed, out_of_range, reversed_, tagged, complete)
