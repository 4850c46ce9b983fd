"""Long outputs: split a tool output into line-aligned, overlapping chunks that fit the prompt budget.

Each chunk keeps the source numbering (``first_line``) so its pruned lines map back in place, and
overlapping chunks simply contribute the same line numbers twice (merged by the span union).
A single line longer than the budget is shown truncated to the model but stays one source line:
the mapping is against the shown text, the line numbers against the source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

CountTokens = Callable[[str], int]


@dataclass(frozen=True)
class Chunk:
    first_line: int  # 1-based source line number of lines[0]
    lines: tuple[str, ...]  # the lines as shown to the model (over-long ones truncated)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def last_line(self) -> int:
        return self.first_line + len(self.lines) - 1


def truncate_to_tokens(text: str, max_tokens: int, count_tokens: CountTokens) -> str:
    """The longest prefix of ``text`` with at most ``max_tokens`` tokens (binary search on characters).

    Works with any counter (a tokenizer or chars/4), at O(log len) counter calls.
    """
    if count_tokens(text) <= max_tokens:
        return text
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if count_tokens(text[:mid]) <= max_tokens:
            low = mid
        else:
            high = mid - 1
    return text[:low]


def split_into_chunks(lines: Sequence[str], line_tokens: Sequence[int], budget: int, *, overlap_lines: int,
                      count_tokens: CountTokens, max_line_tokens: int | None = None) -> list[Chunk]:
    """Greedy line-aligned chunks whose summed ``line_tokens`` (one line + its newline) fit ``budget``.

    Lines costing more than ``max_line_tokens`` (default half the budget, so a long line still
    shares its chunk with some context) are truncated for display. The next chunk starts
    ``overlap_lines`` before the previous one ended, but always at least half a chunk further on,
    so the number of chunks stays bounded whatever the overlap.
    """
    if budget < 1:
        raise ValueError(f"chunk budget must be at least one token, got {budget}")
    line_cap = min(budget, max(1, max_line_tokens if max_line_tokens is not None else budget // 2))
    shown = list(lines)
    costs = list(line_tokens)
    for i, cost in enumerate(costs):
        if cost > line_cap:
            shown[i] = truncate_to_tokens(lines[i], line_cap - 1, count_tokens) if line_cap > 1 else ""
            costs[i] = line_cap
    chunks: list[Chunk] = []
    start, n = 0, len(shown)
    while start < n:
        end, used = start, 0
        while end < n and used + costs[end] <= budget:
            used += costs[end]
            end += 1
        end = max(end, start + 1)  # a capped line always fits on its own (line_cap <= budget)
        chunks.append(Chunk(first_line=start + 1, lines=tuple(shown[start:end])))
        if end >= n:
            break
        start = max(end - overlap_lines, start + max(1, (end - start) // 2))
    return chunks
