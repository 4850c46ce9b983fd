"""Quality filters for labelled examples; every drop is counted under a named reason.

Checks, in order (the first that fails names the drop): spans valid for the output, a query,
enough output lines, a positive has spans and a negative has none, the relevant share of a positive
at most ``max_relevant_share`` (a label that keeps most of the output teaches no pruning), and no
duplicate of an earlier example with the same instance and command.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from squeez_ray.spans import SpanError, count_lines, normalize_spans, split_lines

INVALID_SPANS = "invalid_spans"
EMPTY_QUERY = "empty_query"
TOO_FEW_LINES = "too_few_lines"
POSITIVE_WITHOUT_SPANS = "positive_without_spans"
NEGATIVE_WITH_SPANS = "negative_with_spans"
RELEVANT_SHARE_TOO_HIGH = "relevant_share_too_high"
DUPLICATE = "duplicate"


@dataclass
class QAConfig:
    min_output_lines: int = 5  # drop examples whose tool output is shorter
    max_relevant_share: float = 0.5  # drop examples that keep more than this share of lines (no pruning to learn)
    dedup: bool = True  # by (instance_id, command); negatives are keyed by their own instance_id

    def validate(self) -> list[str]:
        problems = []
        if self.min_output_lines < 1:
            problems.append(f"min_output_lines: must be >= 1, got {self.min_output_lines}")
        if not 0 < self.max_relevant_share <= 1:
            problems.append(f"max_relevant_share: must be in (0, 1], got {self.max_relevant_share}")
        return problems


def _spans(example: Mapping[str, Any]) -> list[tuple[int, int]]:
    return [(s["start_line"], s["end_line"]) if isinstance(s, Mapping) else (s[0], s[1])
            for s in example.get("gold_spans") or []]


def check(example: Mapping[str, Any], config: QAConfig) -> str | None:
    """The reason ``example`` fails QA, or None (duplicates are found by :func:`filter_examples`)."""
    n_lines = len(split_lines(example.get("tool_output") or ""))
    try:
        spans = normalize_spans(_spans(example), n_lines)
    except SpanError:
        return INVALID_SPANS
    if not (example.get("query") or "").strip():
        return EMPTY_QUERY
    if n_lines < config.min_output_lines:
        return TOO_FEW_LINES
    if example.get("is_irrelevant"):
        return NEGATIVE_WITH_SPANS if spans else None
    if not spans:
        return POSITIVE_WITHOUT_SPANS
    if count_lines(spans) > config.max_relevant_share * n_lines:
        return RELEVANT_SHARE_TOO_HIGH
    return None


def filter_examples(examples: Iterable[Mapping[str, Any]], config: QAConfig) -> tuple[list[dict[str, Any]], Counter]:
    """The examples that pass, in input order, and the drop count per reason."""
    kept: list[dict[str, Any]] = []
    dropped: Counter = Counter()
    seen: set[tuple[str, str]] = set()
    for example in examples:
        reason = check(example, config)
        key = (str(example.get("instance_id")), str(example.get("command") or ""))
        if reason is None and config.dedup and key in seen:
            reason = DUPLICATE
        if reason:
            dropped[reason] += 1
            continue
        seen.add(key)
        kept.append(dict(example))
    return kept, dropped
