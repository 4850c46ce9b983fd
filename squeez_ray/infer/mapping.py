"""Verbatim guarantee: map generated lines back to source line numbers; drop and count the rest.

A generative pruner's text is never returned. Each generated line is matched to a source line:

1. exact match (after stripping the ends and collapsing inner runs of whitespace), taking the first
   occurrence after the previous match so repeated lines such as ``}`` resolve by order;
2. otherwise the best rapidfuzz ``ratio`` at or above ``threshold``, searched first between the
   neighbouring matches (monotonic order) and only then over the whole output;
3. for a reply cut at the token limit, its last line may be the start of a source line (prefix);
4. otherwise the line is dropped and counted in ``unmatched``.

Blank generated lines keep a blank source line only where it directly follows the previous match
(the model copying a block that contains an empty line); elsewhere they are ignored, not counted.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Sequence

from squeez_ray.spans import Span, spans_from_line_numbers, split_lines

DEFAULT_THRESHOLD = 90.0


@dataclass
class LineMapping:
    line_numbers: list[int]  # 1-based source line numbers kept, sorted and unique
    unmatched: int = 0  # non-blank generated lines that matched no source line (dropped)
    fuzzy: int = 0  # generated lines matched only by the fuzzy pass
    spans: list[Span] = field(default_factory=list)


def _key(line: str) -> str:
    return " ".join(line.split())


def map_lines_to_spans(generated: Sequence[str], source: str | Sequence[str], *, threshold: float = DEFAULT_THRESHOLD,
                       first_line: int = 1, partial_last: bool = False) -> LineMapping:
    """Map ``generated`` lines onto ``source`` (text or its lines); numbers start at ``first_line``.

    ``first_line`` lets a chunk of a longer output be mapped in place: the chunk's lines are the
    source here, and the numbers come back in the full output's numbering. ``threshold`` is a
    rapidfuzz score 0-100; above 100 turns the fuzzy pass off. ``partial_last``: the reply was cut
    at the token limit, so its last line may be the start of a source line; it then maps to the
    next source line (after the previous match) that begins with it, if it has 8+ characters.
    """
    lines = split_lines(source) if isinstance(source, str) else list(source)
    keys = [_key(line) for line in lines]
    occurrences: dict[str, list[int]] = defaultdict(list)
    for index, key in enumerate(keys):
        occurrences[key].append(index)

    # Pass 1, exact and in order. matched[i] is the source index of generated line i, or None.
    matched: list[int | None] = [None] * len(generated)
    pending: list[int] = []  # non-blank generated lines left for the fuzzy pass
    cursor = -1  # source index of the previous match
    for i, line in enumerate(generated):
        key = _key(line)
        if not key:
            if 0 <= cursor + 1 < len(lines) and not keys[cursor + 1] and cursor >= 0:
                matched[i] = cursor = cursor + 1
            continue
        places = occurrences.get(key)
        if not places:
            pending.append(i)
            continue
        after = bisect_right(places, cursor)
        # Out-of-order blocks are allowed: with no occurrence after the cursor, take the first one.
        matched[i] = cursor = places[after] if after < len(places) else places[0]

    fuzzy = 0
    if pending and threshold <= 100:
        fuzzy = _fuzzy_pass(generated, keys, matched, pending, threshold)
    last = len(generated) - 1
    if partial_last and pending and pending[-1] == last and matched[last] is None:
        matched[last] = _prefix_match(_key(generated[last]), keys, matched)
    kept = sorted({index + first_line for index in matched if index is not None})
    unmatched = sum(1 for i in pending if matched[i] is None)
    return LineMapping(line_numbers=kept, unmatched=unmatched, fuzzy=fuzzy, spans=spans_from_line_numbers(kept))


def _fuzzy_pass(generated: Sequence[str], keys: list[str], matched: list[int | None], pending: list[int],
                threshold: float) -> int:
    from rapidfuzz import fuzz, process

    found = 0
    for i in pending:
        query = _key(generated[i])
        # The window between the nearest matches before and after this line keeps the order monotonic.
        low = next((matched[j] for j in range(i - 1, -1, -1) if matched[j] is not None), -1)
        high = next((matched[j] for j in range(i + 1, len(matched)) if matched[j] is not None), len(keys))
        best = None
        if low + 1 < high:
            best = process.extractOne(query, keys[low + 1:high], scorer=fuzz.ratio, processor=None,
                                      score_cutoff=threshold)
            if best is not None:
                best = (best[0], best[1], best[2] + low + 1)
        if best is None:
            best = process.extractOne(query, keys, scorer=fuzz.ratio, processor=None, score_cutoff=threshold)
        if best is not None:
            matched[i] = best[2]
            found += 1
    return found


def _prefix_match(query: str, keys: list[str], matched: list[int | None]) -> int | None:
    if len(query) < 8:
        return None
    previous = max((m for m in matched if m is not None), default=-1)
    for start in (previous + 1, 0):  # after the previous match first, then anywhere
        for index in range(start, len(keys)):
            if keys[index].startswith(query):
                return index
    return None
